// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"math"

	dto "github.com/prometheus/client_model/go"
)

// HistogramQuantile estimates the q-quantile of a gathered histogram as
// PromQL's histogram_quantile does: linearly within the bucket that holds
// it, and the upper bound of the last finite bucket for ranks past it. A
// histogram without observations gives 0.
func HistogramQuantile(h *dto.Histogram, q float64) float64 {
	total := float64(h.GetSampleCount())
	if total == 0 {
		return 0
	}
	rank := q * total
	lower, below := 0.0, 0.0
	for _, b := range h.GetBucket() {
		upper, count := b.GetUpperBound(), float64(b.GetCumulativeCount())
		if math.IsInf(upper, 1) {
			break
		}
		if count >= rank {
			if count == below {
				return upper
			}
			return lower + (upper-lower)*(rank-below)/(count-below)
		}
		lower, below = upper, count
	}
	return lower
}
