package websim

import (
	"strconv"
	"sync"
	"sync/atomic"
)

// Revisions: a Web's pages can be changed between two crawls of it, as a
// site changes between an archive's monthly crawls. A changed page keeps
// its links (the same pages are found) and gets a new text of the same
// size, with a sentence naming its revision (RevisionToken). The Web keeps
// its own record of what it changed (Changed), for a test to count a
// crawl's revisits and responses against.
type revisions struct {
	any atomic.Bool // some page was changed: render looks revisions up
	mu  sync.RWMutex
	rev map[[2]int]int // (host, page) → revision, 0 (absent) as generated
}

// Change gives each page of host listed in pages its next revision.
// Pages out of range are ignored.
func (w *Web) Change(host int, pages ...int) {
	if host < 0 || host >= w.cfg.Hosts {
		return
	}
	w.revs.mu.Lock()
	defer w.revs.mu.Unlock()
	if w.revs.rev == nil {
		w.revs.rev = map[[2]int]int{}
	}
	for _, p := range pages {
		if p >= 0 && p < w.cfg.PagesPerHost {
			w.revs.rev[[2]int{host, p}]++
		}
	}
	w.revs.any.Store(true)
}

// ChangeEvery changes one page in every n of every host (pages n-1,
// 2n-1, ...; never the root unless n is 1) and returns their URLs.
func (w *Web) ChangeEvery(n int) []string {
	if n < 1 {
		return nil
	}
	var urls []string
	for h := range w.cfg.Hosts {
		var pages []int
		for p := n - 1; p < w.cfg.PagesPerHost; p += n {
			pages = append(pages, p)
			urls = append(urls, w.URL(h, p))
		}
		w.Change(h, pages...)
	}
	return urls
}

// Revision returns the revision of page of host: 0 as generated, one more
// for each Change.
func (w *Web) Revision(host, page int) int {
	if !w.revs.any.Load() {
		return 0
	}
	w.revs.mu.RLock()
	defer w.revs.mu.RUnlock()
	return w.revs.rev[[2]int{host, page}]
}

// Changed returns the URL of every page changed since the Web was made,
// with its revision: the site's own record of its changes.
func (w *Web) Changed() map[string]int {
	w.revs.mu.RLock()
	defer w.revs.mu.RUnlock()
	out := make(map[string]int, len(w.revs.rev))
	for k, r := range w.revs.rev {
		out[w.URL(k[0], k[1])] = r
	}
	return out
}

// RevisionToken is a word that the text of page of host holds at revision
// rev (> 0) and no other page or revision does.
func RevisionToken(host, page, rev int) string {
	return "zqxrev" + strconv.Itoa(host) + "p" + strconv.Itoa(page) + "r" + strconv.Itoa(rev) + "x"
}
