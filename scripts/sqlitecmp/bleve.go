//go:build bleve

package main

import (
	"fmt"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/custom"
	"github.com/blevesearch/bleve/v2/analysis/char/asciifolding"
	"github.com/blevesearch/bleve/v2/analysis/token/lowercase"
	"github.com/blevesearch/bleve/v2/analysis/tokenizer/unicode"
)

// indexBleve indexes n documents made of texts in a new Bleve index at path,
// in batches of 50, and closes it.
func indexBleve(path string, texts []string, n int) error {
	im := bleve.NewIndexMapping()
	if err := im.AddCustomAnalyzer("words", map[string]any{
		"type":          custom.Name,
		"char_filters":  []string{asciifolding.Name},
		"tokenizer":     unicode.Name,
		"token_filters": []string{lowercase.Name},
	}); err != nil {
		return err
	}
	dm := bleve.NewDocumentStaticMapping()
	for _, name := range []string{"title", "body", "url"} {
		f := bleve.NewTextFieldMapping()
		f.Analyzer, f.Store, f.IncludeTermVectors, f.IncludeInAll, f.DocValues = "words", false, true, false, false
		dm.AddFieldMappingsAt(name, f)
	}
	im.DefaultMapping, im.DefaultAnalyzer = dm, "words"
	idx, err := bleve.New(path, im)
	if err != nil {
		return err
	}
	for i := 0; i < n; i += 50 {
		b := idx.NewBatch()
		for j := i; j < i+50; j++ {
			if err := b.Index(fmt.Sprint("id", j), map[string]any{"title": "title words here", "body": texts[j%len(texts)],
				"url": fmt.Sprintf("http://h%d.test/p/%d.html", j%100, j)}); err != nil {
				return err
			}
		}
		if err := idx.Batch(b); err != nil {
			return err
		}
	}
	return idx.Close()
}
