// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

package kubetest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// PLEGKey is one PLEG event as both the kubelet and pleg tell it: the
// pod's UID, the type and the container's (or sandbox's) ID.
type PLEGKey struct {
	PodUID, Type, ID string
}

func (k PLEGKey) String() string {
	id := k.ID
	if len(id) > 12 {
		id = id[:12]
	}
	return k.Type + " " + k.PodUID + "/" + id
}

// KubeletPLEGEvent is one line of a kubelet's log about a PLEG event.
type KubeletPLEGEvent struct {
	PLEGKey
	// Pod is namespace/name, when the kubelet still knew the pod.
	Pod string
	// At is when the kubelet logged the line: its klog header, to the
	// microsecond, read in this process's time zone (the kubelet's, as
	// it inherits the environment) and in the current year, which klog
	// leaves out. Zero when the line has no klog header.
	At time.Time
}

// The kubelet logs each PLEG event it syncs a pod on at -v=2 ("SyncLoop
// (PLEG): event for pod", the pod as namespace/name), and at -v=4 those
// of pods it no longer has; ContainerRemoved it never syncs on, so it
// never logs it.
var plegLine = regexp.MustCompile(`"SyncLoop \(PLEG\): [^"]*"(?: pod="([^"]+)")? event=(\{[^}]*\})`)

// klogHeader is the start of a klog text line: severity, MMDD and
// hh:mm:ss.uuuuuu.
var klogHeader = regexp.MustCompile(`^[IWEF](\d{4} \d{2}:\d{2}:\d{2}\.\d{6}) `)

// klogTime is the time of a klog line's header, or zero.
func klogTime(line []byte, year int) time.Time {
	m := klogHeader.FindSubmatch(line)
	if m == nil {
		return time.Time{}
	}
	at, err := time.ParseInLocation("0102 15:04:05.000000", string(m[1]), time.Local)
	if err != nil {
		return time.Time{}
	}
	return time.Date(year, at.Month(), at.Day(), at.Hour(), at.Minute(), at.Second(), at.Nanosecond(), time.Local)
}

// KubeletPLEGEvents parses a kubelet's log for its PLEG events.
func KubeletPLEGEvents(log []byte) ([]KubeletPLEGEvent, error) {
	var out []KubeletPLEGEvent
	year := time.Now().Year()
	sc := bufio.NewScanner(bytes.NewReader(log))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := plegLine.FindSubmatch(sc.Bytes())
		if m == nil {
			continue
		}
		var ev struct {
			ID, Type string
			Data     any
		}
		if err := json.Unmarshal(m[2], &ev); err != nil {
			return nil, fmt.Errorf("kubelet log line %q: %w", sc.Text(), err)
		}
		id, _ := ev.Data.(string)
		out = append(out, KubeletPLEGEvent{PLEGKey: PLEGKey{PodUID: ev.ID, Type: ev.Type, ID: id}, Pod: string(m[1]),
			At: klogTime(sc.Bytes(), year)})
	}
	return out, sc.Err()
}

// ComparePLEG returns what one side has and the other lacks, and what
// either has more than once, each sorted.
func ComparePLEG(kubelet, pleg []PLEGKey) (onlyKubelet, onlyPleg, twice []PLEGKey) {
	count := func(ks []PLEGKey) map[PLEGKey]int {
		m := map[PLEGKey]int{}
		for _, k := range ks {
			m[k]++
		}
		return m
	}
	kc, pc := count(kubelet), count(pleg)
	for k, n := range kc {
		if pc[k] == 0 {
			onlyKubelet = append(onlyKubelet, k)
		}
		if n > 1 {
			twice = append(twice, k)
		}
	}
	for k, n := range pc {
		if kc[k] == 0 {
			onlyPleg = append(onlyPleg, k)
		}
		if n > 1 {
			twice = append(twice, k)
		}
	}
	for _, ks := range [][]PLEGKey{onlyKubelet, onlyPleg, twice} {
		slices.SortFunc(ks, func(a, b PLEGKey) int { return strings.Compare(a.String(), b.String()) })
	}
	return onlyKubelet, onlyPleg, twice
}

// PLEGEventsOf reads the kubelet's log for the PLEG events of the pods
// uids names (UID to namespace/name). misnamed tells each event of those
// pods for which the kubelet names the pod otherwise than uids does.
func (k *Kubelet) PLEGEventsOf(uids map[string]string) (keys []PLEGKey, misnamed []string, err error) {
	log, err := k.Log()
	if err != nil {
		return nil, nil, err
	}
	evs, err := KubeletPLEGEvents(log)
	if err != nil {
		return nil, nil, err
	}
	for _, ev := range evs {
		name, ok := uids[ev.PodUID]
		if !ok {
			continue
		}
		if ev.Pod != "" && ev.Pod != name {
			misnamed = append(misnamed, fmt.Sprintf("pod %s: the kubelet says %q, the API %q", ev.PodUID, ev.Pod, name))
		}
		keys = append(keys, ev.PLEGKey)
	}
	return keys, misnamed, nil
}
