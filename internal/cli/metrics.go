package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/sfclab/sfclab/deploy"
	"github.com/sfclab/sfclab/telemetry"
	"github.com/spf13/cobra"
)

// errPortInUse is returned when the metrics address is taken by another process.
var errPortInUse = errors.New("address already in use")

func newMetrics() *cobra.Command {
	var listen string
	cmd := &cobra.Command{
		Use:   "metrics [--listen ADDR]",
		Short: "Serve every deployed lab's live counters as Prometheus metrics at /metrics",
		Long: `Serves per interface packets/bytes/drops, per firewall rule counters, per node CPU seconds,
per chain hop counters and deploy durations of every deployed lab at http://ADDR/metrics, in the
Prometheus text format. Counters are read when scraped; nothing runs in between.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := deploy.CheckRoot(); err != nil {
				return err
			}
			ln, err := listenMetrics(listen)
			if err != nil {
				return err
			}
			mux := http.NewServeMux()
			mux.Handle("/metrics", telemetry.Handler())
			mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/" {
					http.NotFound(w, r)
					return
				}
				fmt.Fprintln(w, "sfclab metrics: see /metrics")
			})
			srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
			fmt.Fprintf(cmd.OutOrStdout(), "serving metrics at http://%s/metrics (Ctrl-C stops)\n", ln.Addr())
			done := make(chan error, 1)
			go func() { done <- srv.Serve(ln) }()
			select {
			case err := <-done:
				return fmt.Errorf("serve metrics: %w", err)
			case <-cmd.Context().Done():
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				return srv.Shutdown(ctx)
			}
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:9464", "address to serve /metrics on")
	return cmd
}

// listenMetrics opens the metrics address; a port in use gets a message saying what to do.
func listenMetrics(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("listen on %s: %w: another process serves there (find it with: ss -ltnp 'sport = :%s'); pick another with --listen", addr, errPortInUse, portOf(addr))
	}
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return ln, nil
}

func portOf(addr string) string {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return p
}
