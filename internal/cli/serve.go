package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/sfclab/sfclab/api"
	"github.com/sfclab/sfclab/apiplane"
	"github.com/sfclab/sfclab/deploy"
	"github.com/sfclab/sfclab/journal"
	"github.com/sfclab/sfclab/telemetry"
	"github.com/sfclab/sfclab/vnf/kinds"
	"github.com/spf13/cobra"
)

// DefaultListen is where `sfclab serve` listens: Neutron's port, on loopback only.
const DefaultListen = "127.0.0.1:9696"

func newServe() *cobra.Command {
	var listen, tokenFile, record string
	cmd := &cobra.Command{
		Use:   "serve [--listen 127.0.0.1:9696] [--token-file FILE]",
		Short: "Serve the OpenStack networking-sfc API (and read-only Neutron ports) for the labs on this host",
		Long: `serve answers the networking-sfc REST API v2.0 (flow classifiers, port pairs, port pair
groups, port chains, service graphs) and Neutron's /v2.0/ports and /v2.0/networks for every lab
deployed on this host, so that the OpenStack client drives sfclab unchanged:

  openstack --os-auth-type none --os-endpoint http://127.0.0.1:9696 sfc port chain list

Ports are named NODE-IFACE (e.g. f1-ingress, client-eth0). Resources are stored in the lab's
journal (LAB/sfc.json) and removed by 'sfclab destroy'. It listens on loopback by default;
any other address needs --token-file: every request must then send the file's token as
X-Auth-Token (e.g. openstack --os-auth-type admin_token --os-token TOKEN ...).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			token, err := serveToken(listen, tokenFile)
			if err != nil {
				return err
			}
			root := journal.StateRoot()
			release, err := api.LockJournal(root)
			if err != nil {
				return err
			}
			defer release()
			rec := &api.Recorder{Path: record}
			cfg := api.Config{
				Journal:   journal.Journal{Root: root, Kinds: kinds.Spec()},
				DataPlane: &apiplane.Switch{Plane: &apiplane.Plane{Journal: journal.Journal{Root: root}}, Other: rec},
				Token:     token,
				Log:       func(f string, a ...any) { fmt.Fprintf(cmd.ErrOrStderr(), f+"\n", a...) },
			}
			// The labs' live counters, read on scrape (sfclab metrics serves the same alone).
			cfg.Metrics = telemetry.HandlerFor(telemetry.NewCollector(&deploy.Deployer{Journal: journal.Journal{Root: root}}, nil))
			s, err := api.New(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return fmt.Errorf("listen on %s: %w", listen, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "serving the networking-sfc API on http://%s (journal %s)\n", ln.Addr(), cfg.Journal.Dir(""))
			fmt.Fprintln(cmd.ErrOrStderr(), "data plane: chains of transparent labs are steered (written to their BPF maps); chains of routed labs are validated, stored and recorded, not steered")
			return serveUntilDone(cmd.Context(), ln, s.Handler())
		},
	}
	cmd.Flags().StringVar(&listen, "listen", DefaultListen, "address to listen on; other than loopback needs --token-file")
	cmd.Flags().StringVar(&tokenFile, "token-file", "", "file holding the token every request must send as X-Auth-Token")
	cmd.Flags().StringVar(&record, "record", "", "append every data plane call to this file as JSON lines")
	return cmd
}

// serveToken reads the token file, and refuses a non-loopback address without one.
func serveToken(listen, tokenFile string) (string, error) {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("--listen %q: %w (give HOST:PORT, e.g. %s)", listen, err, DefaultListen)
	}
	token := ""
	if tokenFile != "" {
		data, err := os.ReadFile(tokenFile)
		if err != nil {
			return "", fmt.Errorf("read token file: %w", err)
		}
		token = strings.TrimSpace(string(data))
		if token == "" {
			return "", fmt.Errorf("token file %s is empty: put a secret in it, e.g. head -c 24 /dev/urandom | base64 > %s", tokenFile, tokenFile)
		}
	}
	if token == "" && !isLoopback(host) {
		return "", fmt.Errorf("--listen %s is reachable from other hosts: give --token-file FILE (requests without its X-Auth-Token get 401), or listen on 127.0.0.1", listen)
	}
	return token, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// serveUntilDone serves until ctx is cancelled (Ctrl-C), then lets requests in flight finish.
func serveUntilDone(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, IdleTimeout: 2 * time.Minute}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.Background(), 35*time.Second)
	defer cancel()
	if err := srv.Shutdown(shut); err != nil {
		return fmt.Errorf("stop serving: %w", err)
	}
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
