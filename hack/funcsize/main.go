// Copyright 2026 The pleg Authors.
// SPDX-License-Identifier: Apache-2.0

// Command funcsize prints the functions of the Go files of one directory,
// tests left out, largest first, with their lengths in lines: a structure
// measure that needs no tool outside the standard library.
//
//	go run ./hack/funcsize [-n 5] [dir]
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

type fn struct {
	name  string
	pos   string
	lines int
}

func main() {
	n := flag.Int("n", 5, "how many functions to print")
	flag.Parse()
	dir := "."
	if flag.NArg() > 0 {
		dir = flag.Arg(0)
	}
	fns, err := funcs(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "funcsize:", err)
		os.Exit(1)
	}
	sort.Slice(fns, func(i, j int) bool { return fns[i].lines > fns[j].lines })
	for _, f := range fns[:min(*n, len(fns))] {
		fmt.Printf("%5d %s %s\n", f.lines, f.name, f.pos)
	}
}

// funcs returns every function and method declared in dir's non-test Go
// files.
func funcs(dir string) ([]fn, error) {
	fset := token.NewFileSet()
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	var out []fn
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			name := fd.Name.Name
			if fd.Recv != nil && len(fd.Recv.List) > 0 {
				name = recvName(fd.Recv.List[0].Type) + "." + name
			}
			start, end := fset.Position(fd.Pos()), fset.Position(fd.End())
			pos := fmt.Sprintf("%s:%d", start.Filename, start.Line)
			out = append(out, fn{name: name, pos: pos, lines: end.Line - start.Line + 1})
		}
	}
	return out, nil
}

// recvName returns a receiver's type name, without pointer or type
// parameters.
func recvName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return recvName(t.X)
	case *ast.IndexExpr:
		return recvName(t.X)
	case *ast.IndexListExpr:
		return recvName(t.X)
	case *ast.Ident:
		return t.Name
	}
	return "?"
}
