// Package iperf speaks iperf3's protocol (as of iperf 3.12) for TCP tests: a client that measures
// against a real iperf3 server, and a server a real iperf3 client can measure against, with
// reverse mode, parallel streams and iperf3-shaped JSON results. It runs over any Network, so
// the same code measures the host's kernel sockets and nicstack's embedded user-space stack.
package iperf

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
)

// Control-channel states, one signed byte each (iperf_api.h).
const (
	stateTestStart       = 1
	stateTestRunning     = 2
	stateTestEnd         = 4
	stateParamExchange   = 9
	stateCreateStreams   = 10
	stateServerTerminate = 11
	stateClientTerminate = 12
	stateExchangeResults = 13
	stateDisplayResults  = 14
	stateIperfDone       = 16
	stateAccessDenied    = -1
	stateServerError     = -2
)

// cookieSize is iperf3's COOKIE_SIZE: 36 characters and a NUL, sent first on every connection
// so the server can tell the test's data streams from other clients.
const cookieSize = 37

// maxControlJSON bounds a control message: parameters and results are a few hundred bytes per
// stream, so anything near this is a confused or hostile peer.
const maxControlJSON = 1 << 20

// DefaultBlockSize is iperf3's default TCP read/write size (-l).
const DefaultBlockSize = 128 << 10

// Version is what we announce as client_version and in results.
const Version = "3.12"

type cookie [cookieSize]byte

func newCookie() (cookie, error) {
	const chars = "abcdefghijklmnopqrstuvwxyz234567" // iperf3's alphabet: 32 symbols
	var c cookie
	if _, err := rand.Read(c[:cookieSize-1]); err != nil {
		return c, err
	}
	for i := 0; i < cookieSize-1; i++ {
		c[i] = chars[c[i]%32]
	}
	c[cookieSize-1] = 0
	return c, nil
}

func (c cookie) String() string { return string(c[:cookieSize-1]) }

func writeState(w io.Writer, s int8) error {
	_, err := w.Write([]byte{byte(s)})
	return err
}

func readState(r io.Reader) (int8, error) {
	var b [1]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return 0, err
	}
	return int8(b[0]), nil
}

// writeJSON sends v as iperf3 does: a 4-byte big-endian length, then the JSON text.
func writeJSON(w io.Writer, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	msg := make([]byte, 4+len(body))
	binary.BigEndian.PutUint32(msg, uint32(len(body)))
	copy(msg[4:], body)
	_, err = w.Write(msg)
	return err
}

func readJSON(r io.Reader, v any) error {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > maxControlJSON {
		return fmt.Errorf("iperf: control message of %d bytes is too large", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return err
	}
	return json.Unmarshal(body, v)
}

// params is the PARAM_EXCHANGE message (send_parameters in iperf_api.c). Only what a TCP test
// needs; unknown fields from newer clients are ignored.
type params struct {
	TCP           bool   `json:"tcp,omitempty"`
	UDP           bool   `json:"udp,omitempty"`
	SCTP          bool   `json:"sctp,omitempty"`
	Omit          int    `json:"omit"`
	Time          int    `json:"time,omitempty"`
	Num           int64  `json:"num"`
	BlockCount    int64  `json:"blockcount"`
	Parallel      int    `json:"parallel"`
	Reverse       bool   `json:"reverse,omitempty"`
	Bidirectional bool   `json:"bidirectional,omitempty"`
	Len           int    `json:"len"`
	Bandwidth     int64  `json:"bandwidth,omitempty"`
	PacingTimer   int    `json:"pacing_timer,omitempty"`
	ClientVersion string `json:"client_version,omitempty"`
}

// results is the EXCHANGE_RESULTS message each side sends. Numbers are float64 because a real
// iperf3 sends -1 as 18446744073709551615 in some fields.
type results struct {
	CPUUtilTotal         float64        `json:"cpu_util_total"`
	CPUUtilUser          float64        `json:"cpu_util_user"`
	CPUUtilSystem        float64        `json:"cpu_util_system"`
	SenderHasRetransmits float64        `json:"sender_has_retransmits"`
	CongestionUsed       string         `json:"congestion_used,omitempty"`
	Streams              []streamResult `json:"streams"`
}

type streamResult struct {
	ID          int     `json:"id"`
	Bytes       float64 `json:"bytes"`
	Retransmits float64 `json:"retransmits"`
	Jitter      float64 `json:"jitter"`
	Errors      float64 `json:"errors"`
	Packets     float64 `json:"packets"`
	StartTime   float64 `json:"start_time"`
	EndTime     float64 `json:"end_time"`
}

// streamID numbers streams the way iperf_add_stream does: 1, then 3, 4, 5, ... Both ends number
// in connection order and match results by id, so we must skip 2 as well.
func streamID(i int) int {
	if i == 0 {
		return 1
	}
	return i + 2
}
