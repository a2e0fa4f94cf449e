// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Package doccmd finds the shell commands the project's Markdown and the
// CLI's help text (the Example of each command) show a reader, and says
// which test runs each: a command in README.md, docs/ or a --help that no
// test runs is one an operator may be the first to find broken.
//
// A command is a line of a fenced block marked sh (every line but comments
// and blank ones), or a line of any other block that starts with the
// prompt "$ " (the block mixes commands and their output). A line that
// ends in a backslash goes on into the next; a comment after " #" is not
// part of the command.
package doccmd

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Command is one shell command shown in a Markdown file.
type Command struct {
	// File is the Markdown file's path, relative to the repository root.
	File string
	// Line is the line of the file the command starts on, from 1.
	Line int
	// Block is the line of the block's opening fence: the commands of one
	// block are one session, run in order.
	Block int
	// Text is the command as a shell reads it: continuations joined,
	// the prompt and any trailing comment removed.
	Text string
}

func (c Command) String() string { return fmt.Sprintf("%s:%d: %s", c.File, c.Line, c.Text) }

// Files are the Markdown files whose commands must be run by a test.
func Files(root string) ([]string, error) {
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	files := []string{"README.md", "CONTRIBUTING.md"}
	for _, d := range docs {
		rel, err := filepath.Rel(root, d)
		if err != nil {
			return nil, err
		}
		files = append(files, filepath.ToSlash(rel))
	}
	slices.Sort(files)
	return files, nil
}

// Load reads the commands of every file Files names, then those of the
// CLI's help text (Help).
func Load(root string) ([]Command, error) {
	files, err := Files(root)
	if err != nil {
		return nil, err
	}
	var all []Command
	for _, f := range files {
		md, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return nil, err
		}
		cmds, err := Parse(f, string(md))
		if err != nil {
			return nil, err
		}
		all = append(all, cmds...)
	}
	help, err := Help()
	if err != nil {
		return nil, err
	}
	return append(all, help...), nil
}

// commandWords start the commands a reader may type; an unmarked block
// that starts with one is a command block without its sh mark, which
// Parse refuses so that no command hides from the tests.
var commandWords = regexp.MustCompile(`^(sudo |cd |make |go |pleg |kubectl |helm |crictl |curl |ctr |[A-Z_]+=\S* )`)

// Parse returns the commands of one Markdown file's fenced blocks.
func Parse(file, md string) ([]Command, error) {
	var (
		cmds    []Command
		inBlock bool
		block   int
		lang    string
		first   bool
		pending *Command
	)
	for i, line := range strings.Split(md, "\n") {
		n := i + 1
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") {
			if inBlock {
				if pending != nil {
					return nil, fmt.Errorf("%s:%d: the command's last line goes on past its block", file, pending.Line)
				}
				inBlock = false
				continue
			}
			inBlock, block, lang, first = true, n, strings.TrimSpace(strings.TrimPrefix(trimmed, "```")), true
			continue
		}
		if !inBlock {
			continue
		}
		isFirst := first
		first = false
		if pending != nil {
			more := strings.TrimSpace(stripComment(trimmed))
			more, cont := continued(more)
			pending.Text += " " + more
			if !cont {
				cmds = append(cmds, *pending)
				pending = nil
			}
			continue
		}
		var text string
		switch {
		case lang == "sh" || lang == "bash" || lang == "shell":
			if trimmed == "" || strings.HasPrefix(trimmed, "#") {
				continue
			}
			text = trimmed
		case strings.HasPrefix(trimmed, "$ "):
			text = strings.TrimPrefix(trimmed, "$ ")
		case lang == "" && isFirst && commandWords.MatchString(trimmed):
			return nil, fmt.Errorf("%s:%d: a block of commands without its sh mark (or a \"$ \" prompt): %q", file, n, trimmed)
		default:
			continue
		}
		text = strings.TrimSpace(stripComment(text))
		c := Command{File: file, Line: n, Block: block}
		if more, cont := continued(text); cont {
			c.Text = more
			pending = &c
			continue
		}
		c.Text = text
		cmds = append(cmds, c)
	}
	if inBlock {
		return nil, fmt.Errorf("%s: a fenced block is not closed", file)
	}
	return cmds, nil
}

// continued says whether a line goes on into the next, as a shell reads
// it: after a backslash (removed) or a pipe or list operator (kept).
func continued(line string) (string, bool) {
	if more, ok := strings.CutSuffix(line, `\`); ok {
		return strings.TrimSpace(more), true
	}
	for _, op := range []string{"|", "&&", "||"} {
		if strings.HasSuffix(line, op) {
			return line, true
		}
	}
	return line, false
}

// stripComment removes a shell comment: a # at the start or after a
// blank, outside quotes.
func stripComment(s string) string {
	var quote rune
	prev := ' '
	for i, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '#' && (prev == ' ' || prev == '\t'):
			return strings.TrimRight(s[:i], " \t")
		}
		prev = r
	}
	return s
}
