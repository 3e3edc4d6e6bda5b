//go:build cgosqlite

package main

import _ "github.com/mattn/go-sqlite3"

const driverName = "sqlite3"

func dsn(p string) string { return "file:" + p }
