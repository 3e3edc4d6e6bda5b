// Package deploy holds gridcrawl's production deployment files and the test
// that keeps them in step with the code. It has no Go API.
//
//   - Dockerfile: one multi-stage build with one target per image: mcp,
//     loader, crawler and grid (the Go binaries, built together, on Alpine
//     as the unprivileged user gridcrawl) and minio (MinIO built from source
//     at the version scripts/services/minio.sh pins). Build from the
//     repository root: docker build -f deploy/Dockerfile --target mcp .
//   - Dockerfile.dockerignore: what the build context leaves out.
//   - rabbitmq/: configuration mounted into the RabbitMQ container.
//
// ../docker-compose.yml runs the grid: RabbitMQ, Elasticsearch and MinIO
// with health checks and volumes, the MCP on port 8080, and loaders and
// crawlers that scale with docker compose up --scale loader=N --scale
// crawler=M. No Docker engine is needed to test it: compose_test.go parses
// the compose file and the Dockerfile and checks them against the code:
// every GRIDCRAWL_* variable they set is one a service reads, every image
// target builds an existing main package, ports agree with
// GRIDCRAWL_LISTEN, dependencies are healthy backends, backend URLs name
// services of the file with the credentials those services start with, and
// the scalable services have no fixed name or host port.
package deploy
