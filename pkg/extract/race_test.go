//go:build race

package extract

// raceEnabled shrinks the largest generated inputs: the race detector makes
// them many times slower without testing anything more.
const raceEnabled = true
