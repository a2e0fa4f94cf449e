// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Package docs tests the repository's documentation against the
// repository: every link of its Markdown and of the alerts and dashboards
// leads somewhere, and the README's library example is the Example that
// go test runs. It lives apart from the library so that the root package
// lists only the library; its tests run at the repository's root.
package docs
