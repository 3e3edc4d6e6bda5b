package main

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// The soak's own reads and writes (checks, clean-up) go to whichever node
// of a backend answers: on the clusters one node may be down for good
// (-no-restart), and the environment names every node, comma-separated.

// endpoints splits the comma-separated list in the environment variable.
func endpoints(env string) []string {
	var out []string
	for _, e := range strings.Split(os.Getenv(env), ",") {
		if e = strings.TrimRight(strings.TrimSpace(e), "/"); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// probe is the client of the liveness probes: a dead node's port refuses at
// once, a hung one must not hold the check up.
var probe = http.Client{Timeout: 5 * time.Second}

// esClient is the client of the soak's own Elasticsearch requests: an
// Elasticsearch that accepts connections but has no elected master (two of
// three nodes down) answers nothing, and a check or clean-up must not hang
// on it.
var esClient = &http.Client{Timeout: 2 * time.Minute}

// liveES returns the first Elasticsearch URL of GRIDCRAWL_ES_URL that
// answers.
func liveES() (string, error) {
	var errs []error
	for _, u := range endpoints("GRIDCRAWL_ES_URL") {
		resp, err := probe.Get(u + "/_cluster/health?local=true")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return u, nil
			}
			err = errors.New(resp.Status)
		}
		errs = append(errs, fmt.Errorf("%s: %w", u, err))
	}
	return "", fmt.Errorf("no Elasticsearch node of GRIDCRAWL_ES_URL answers: %w", errors.Join(errs...))
}

// liveS3 returns the first endpoint of GRIDCRAWL_S3_ENDPOINT whose MinIO
// says it is live.
func liveS3() (string, error) {
	var errs []error
	for _, ep := range endpoints("GRIDCRAWL_S3_ENDPOINT") {
		host := strings.TrimPrefix(strings.TrimPrefix(ep, "http://"), "https://")
		resp, err := probe.Get("http://" + host + "/minio/health/live")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return host, nil
			}
			err = errors.New(resp.Status)
		}
		errs = append(errs, fmt.Errorf("%s: %w", ep, err))
	}
	return "", fmt.Errorf("no MinIO endpoint of GRIDCRAWL_S3_ENDPOINT answers: %w", errors.Join(errs...))
}

// minioClient returns a client of a live MinIO endpoint.
func minioClient() (*minio.Client, error) {
	ep, err := liveS3()
	if err != nil {
		return nil, err
	}
	cl, err := minio.New(ep, &minio.Options{
		Creds: credentials.NewStaticV4(os.Getenv("GRIDCRAWL_S3_ACCESS_KEY"), os.Getenv("GRIDCRAWL_S3_SECRET_KEY"), ""),
	})
	if err != nil {
		return nil, fmt.Errorf("connect to minio %s: %w", ep, err)
	}
	return cl, nil
}

// nodeCluster returns the cluster a -backend-kills entry belongs to
// (rabbitmq, elasticsearch, minio), or "" when it names none.
func nodeCluster(name string) string {
	num := func(prefix string, n int) bool {
		rest, ok := strings.CutPrefix(name, prefix)
		return ok && len(rest) == 1 && rest[0] >= '1' && rest[0] <= byte('0'+n)
	}
	switch {
	case name == "rabbitmq" || num("rabbit", 3):
		return "rabbitmq"
	case name == "elasticsearch" || num("es", 3):
		return "elasticsearch"
	case name == "minio" || num("minio", 4):
		return "minio"
	}
	return ""
}
