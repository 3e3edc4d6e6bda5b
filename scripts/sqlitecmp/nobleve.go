//go:build !bleve

package main

import "errors"

func indexBleve(string, []string, int) error {
	return errors.New("built without Bleve: go build -tags bleve")
}
