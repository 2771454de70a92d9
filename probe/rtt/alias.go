package rtt

import (
	"context"
	"net/netip"

	"github.com/sfclab/sfclab/probe/rtt/echo"
)

// The measuring path (the sockets, their four timestamps, the pacing threads, the result) is
// package echo's, which imports nothing of sfclab, so that a VM guest's agent sends a VM
// source's echoes with the same code (linked into sfclab-guest without the probe, results and
// pktgen packages). These names keep package rtt's API.

// Protocols.
const (
	ProtoICMP = echo.ProtoICMP
	ProtoUDP  = echo.ProtoUDP
)

// Methods: how echoes are sent (Config.Method).
const (
	MethodSocket  = echo.MethodSocket
	MethodXDP     = echo.MethodXDP
	MethodXDPName = echo.MethodXDPName
	HighRateFrom  = echo.HighRateFrom
)

// Max as a rate asks for a flood (echo.Max).
const Max = echo.Max

// Limits (echo's).
const (
	MaxCount    = echo.MaxCount
	MaxRate     = echo.MaxRate
	MaxDuration = echo.MaxDuration
	DefaultPort = echo.DefaultPort
	MinSize     = echo.MinSize
	MaxSize     = echo.MaxSize
	MaxAttempts = echo.MaxAttempts
)

// Where the path of an echo starts and ends (Config.PathEnd, Result.PathEnd).
const (
	PathEndTC     = echo.PathEndTC
	PathEndSocket = echo.PathEndSocket
	PathEndXDP    = echo.PathEndXDP
)

// Errors (echo's).
var (
	ErrConfig   = echo.ErrConfig
	ErrProtocol = echo.ErrProtocol
	ErrICMPv6   = echo.ErrICMPv6
)

// Config is one run of the probe (echo.Config).
type Config = echo.Config

// Packet is one echo (echo.Packet).
type Packet = echo.Packet

// Result is one run of the probe (echo.Result).
type Result = echo.Result

// Doer runs fn inside a node's network namespace (probe.Node satisfies it).
type Doer = echo.Doer

// Measure sends cfg.Count echoes at cfg.Rate from inside src to dst (echo.Measure).
func Measure(ctx context.Context, src Doer, dst netip.AddrPort, cfg Config) (*Result, error) {
	return echo.Measure(ctx, src, dst, cfg)
}

// Median returns the median of ds (0 for none).
var Median = echo.Median

// RateLabel is how a rate appears in labels: "max" or packets/s.
var RateLabel = echo.RateLabel
