package runtime

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// programsScript prints each of its arguments that the node has no program for.
const programsScript = `for p in "$@"; do command -v "$p" >/dev/null 2>&1 || echo "$p"; done`

// CheckImagePrograms verifies, in one command in node (a node running the lab's own image,
// docker.image), that the image has every program of needs (a program and the nodes needing
// it, as kinds.Needs lists them). The error names the image, each missing program with the
// nodes needing it, and what to do: add them to the image (then the words of also, how the
// image reaches the runtime, when it says more than that) or use sfclab's own image.
// Equivalent to: sh -c 'for p; do command -v "$p" || echo "$p"; done' sh PROG...
func CheckImagePrograms(ctx context.Context, node Node, image string, needs map[string][]string, also string) error {
	if len(needs) == 0 {
		return nil
	}
	progs := slices.Sorted(maps.Keys(needs))
	out, err := node.Output(ctx, nil, append([]string{"/bin/sh", "-c", programsScript, "sh"}, progs...)...)
	if err != nil {
		return fmt.Errorf("check programs in image %s: %w", image, err)
	}
	var missing []string
	for _, prog := range strings.Fields(string(out)) {
		missing = append(missing, fmt.Sprintf("%s (needed by %s)", prog, strings.Join(needs[prog], ", ")))
	}
	if len(missing) > 0 {
		if also != "" {
			also = " " + also
		}
		return fmt.Errorf("check programs in image %s: missing: %s; add them to the image%s or use sfclab's own (remove docker.image)", image, strings.Join(missing, "; "), also)
	}
	return nil
}
