package telemetry

import (
	"strconv"
	"strings"
)

func itoa(i int) string { return strconv.Itoa(i) }

func fmtKey(lv []string) string { return strings.Join(lv, "\x00") }
