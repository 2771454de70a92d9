package rtt

import "github.com/sfclab/sfclab/probe/rtt/echo"

// The measuring path (the sockets, their four timestamps, the pacing threads, the result) is
// package echo's, which imports nothing of sfclab, so that a VM guest's agent sends a VM
// source's echoes with the same code (linked into sfclab-guest without the probe, results and
// pktgen packages). Its constants, errors and functions (echo.Max, echo.MethodXDP,
// echo.PathEndTC, echo.ErrConfig, echo.Measure, echo.Median, ...) are used from echo by name;
// the types below stay here because package rtt's own API is written in them (New, Warm,
// Samples, AttemptSamples, StartResponder) and experiment builds the probe's rtt.Config.

// Config is one run of the probe (echo.Config).
type Config = echo.Config

// Packet is one echo (echo.Packet).
type Packet = echo.Packet

// Result is one run of the probe (echo.Result).
type Result = echo.Result

// Doer runs fn inside a node's network namespace (probe.Node satisfies it).
type Doer = echo.Doer
