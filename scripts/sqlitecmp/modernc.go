//go:build !cgosqlite

package main

import _ "modernc.org/sqlite"

const driverName = "sqlite"

func dsn(p string) string { return "file:" + p }
