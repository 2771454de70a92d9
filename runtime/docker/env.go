package docker

import (
	"context"
	"os/exec"
	"strings"
	"time"
)

// Environment is what the Docker Engine says of itself, for a run's environment: its version,
// storage driver and cgroup driver and version (docker version, docker info); "not
// available" when no engine answers.
func (Runtime) Environment(ctx context.Context) map[string]string {
	v := firstLine(ctx, "docker", "version", "--format", "{{.Server.Version}}")
	if v == "not available" || strings.Contains(v, "Cannot connect") || strings.Contains(v, "rror") {
		return map[string]string{"docker": "not available"}
	}
	info := firstLine(ctx, "docker", "info", "--format", "{{.Driver}}|{{.CgroupDriver}}|{{.CgroupVersion}}")
	env := map[string]string{"docker": v}
	if f := strings.Split(info, "|"); len(f) == 3 {
		env["docker_storage_driver"] = f[0]
		env["docker_cgroup"] = f[1] + " driver, cgroup v" + f[2]
	}
	return env
}

// firstLine is the first line of a short command's output (within 2 s), "not available"
// when it fails without output.
func firstLine(ctx context.Context, argv ...string) string {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil && len(out) == 0 {
		return "not available"
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return line
}
