package cli

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// buildVersion names the build: Version when the Makefile set it, else
// what Go recorded in the binary (go version -m bin/sfclab): the commit
// (vcs.revision, shortened) with "-dirty" when the tree had uncommitted
// changes (vcs.modified), or the module version of `go install ...@v`.
func buildVersion() string {
	info, ok := debug.ReadBuildInfo()
	return versionOf(Version, info, ok)
}

func versionOf(set string, info *debug.BuildInfo, ok bool) string {
	if set != "" && set != "dev" {
		return set
	}
	if !ok || info == nil {
		return "unknown (no build information in the binary)"
	}
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if modified == "true" {
			rev += "-dirty"
		}
		return rev
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	return "unknown (built without version control information: use make build, or go build -buildvcs=true in a git clone)"
}

func newVersion() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print which build of sfclab this is (the commit, -dirty with uncommitted changes)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), "sfclab", buildVersion())
			return err
		},
	}
}
