package spec_test

import (
	"strings"
	"testing"

	"github.com/sfclab/sfclab/spec"
	"github.com/sfclab/sfclab/vnf/kinds"
)

// TestDockerImageRuntimes: docker.image (the image every node runs) is the docker and the
// kubernetes runtimes'; netns and vm nodes run no image and refuse it, naming the runtime;
// docker.attach stays the docker runtime's.
func TestDockerImageRuntimes(t *testing.T) {
	const lab = `name: img
runtime: RT
docker: {image: example.org/node:1}
endpoints:
  client: {kind: client}
  server: {kind: server}
functions:
  fw: {kind: forwarder}
chains:
  - {from: client, to: server, hops: [fw]}
`
	for _, rt := range []string{spec.RuntimeDocker, spec.RuntimeKubernetes} {
		l, err := spec.Decode([]byte(strings.Replace(lab, "RT", rt, 1)), "i.yaml", kinds.Spec())
		if err != nil {
			t.Errorf("docker.image with runtime %s refused: %v", rt, err)
			continue
		}
		if l.Docker.Image != "example.org/node:1" {
			t.Errorf("runtime %s: image %q", rt, l.Docker.Image)
		}
	}
	for _, rt := range []string{spec.RuntimeNetns, spec.RuntimeVM} {
		_, err := spec.Decode([]byte(strings.Replace(lab, "RT", rt, 1)), "i.yaml", kinds.Spec())
		want := `docker.image "example.org/node:1" needs runtime: docker or kubernetes (runtime ` + rt + ` runs no container image); remove it`
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("docker.image with runtime %s: err = %v\nwant %s", rt, err, want)
		}
	}
	_, err := spec.Decode([]byte(strings.NewReplacer("RT", spec.RuntimeKubernetes, "image: example.org/node:1", "attach: nat").Replace(lab)), "i.yaml", kinds.Spec())
	if err == nil || !strings.Contains(err.Error(), "docker: settings need runtime: docker (docker.attach is the docker runtime's)") {
		t.Errorf("docker.attach with runtime kubernetes: %v", err)
	}
}
