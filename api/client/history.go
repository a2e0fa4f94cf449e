// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/plegkit/pleg/api"
)

// History reads /v1/history: what the daemon's journal holds of the
// events q selects. A bad query is a *StatusError with code 400.
func (c *Client) History(ctx context.Context, q api.HistoryQuery) (api.History, error) {
	var h api.History
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.get(ctx, "/v1/history", q.Query(), http.Header{"Accept": {"application/json"}}, http.StatusOK)
	if err != nil {
		return h, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxBody)).Decode(&h); err != nil {
		return h, fmt.Errorf("/v1/history: %w", err)
	}
	return h, nil
}
