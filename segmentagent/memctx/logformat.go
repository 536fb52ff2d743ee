// Copyright The gpotel Authors
// SPDX-License-Identifier: Apache-2.0

package memctx

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/gpotel/gpotel/internal/dialect"
)

// Record is one server log entry: who wrote it and its message, and where
// the layout has them (not stderr) its time, severity, SQLSTATE and session.
type Record struct {
	PID     int64
	Message string
	// Time is the record's time; zero when the layout has none.
	Time     time.Time
	Severity string
	SQLState string
	// SessionStart is the session start the record names; zero: none.
	SessionStart time.Time
	// Session is Greenplum's gp_session_id (con<N>), CommandCount its
	// cmd<M> and Segment its gp_segment (seg<N>); 0, 0, 0 elsewhere.
	Session, CommandCount, Segment int64
	Greenplum                      bool // the record came from Greenplum's layout
}

// LogFormat reads one of the server's log layouts.
type LogFormat interface {
	// Name says which layout: jsonlog, csvlog, stderr or gpcsv.
	Name() string
	// Next returns the first complete entry of buf and how many bytes it
	// took; n is 0 when buf holds no complete entry yet. buf must begin at
	// an entry's start.
	Next(buf []byte) (entry []byte, n int)
	// Parse reads one entry; ok is false for one it cannot read (another
	// process's continuation line, a foreign line).
	Parse(entry []byte) (r Record, ok bool)
	// Skip passes over the rest of an entry too long to keep: it returns how
	// many bytes of buf belong to it and whether its end was among them.
	// state carries what Skip needs between calls (whether a quote is open).
	Skip(buf []byte, state *bool) (n int, done bool)
	// Resync finds the first entry after the one carrying mark, where buf
	// may begin anywhere (even inside a quoted field): n bytes of buf come
	// before it; ok is false while buf does not hold it yet (the n bytes may
	// still be dropped).
	Resync(buf []byte, mark string) (n int, ok bool)
}

// lineFormat is Next, Skip and Resync for layouts with one entry per line.
type lineFormat struct{}

// Next implements LogFormat.
func (lineFormat) Next(buf []byte) ([]byte, int) {
	i := bytes.IndexByte(buf, '\n')
	if i < 0 {
		return nil, 0
	}
	return buf[:i], i + 1
}

// Skip implements LogFormat.
func (lineFormat) Skip(buf []byte, _ *bool) (int, bool) {
	if i := bytes.IndexByte(buf, '\n'); i >= 0 {
		return i + 1, true
	}
	return len(buf), false
}

// Resync implements LogFormat: the entry after the line holding mark.
func (f lineFormat) Resync(buf []byte, mark string) (int, bool) {
	i := bytes.Index(buf, []byte(mark))
	if i < 0 {
		return max(0, len(buf)-len(mark)+1), false
	}
	n, done := f.Skip(buf[i:], nil)
	if !done {
		return i, false
	}
	return i + n, true
}

// csvFormat is Next, Skip and Resync for CSV layouts, whose quoted fields
// may span lines.
type csvFormat struct{}

// Next implements LogFormat: a newline ends a record only outside quotes
// ("" inside a quoted field toggles twice and so changes nothing).
func (f csvFormat) Next(buf []byte) ([]byte, int) {
	quoted := false
	n, done := f.Skip(buf, &quoted)
	if !done {
		return nil, 0
	}
	return buf[:n-1], n
}

// Skip implements LogFormat.
func (csvFormat) Skip(buf []byte, quoted *bool) (int, bool) {
	for i, c := range buf {
		switch c {
		case '"':
			*quoted = !*quoted
		case '\n':
			if !*quoted {
				return i + 1, true
			}
		}
	}
	return len(buf), false
}

// Resync implements LogFormat. The mark is the end of a message field,
// so a quote follows it there and only there (the statement that logged it
// has it between single quotes); after that quote no quote is open.
func (f csvFormat) Resync(buf []byte, mark string) (int, bool) {
	needle := []byte(mark + `"`)
	i := bytes.Index(buf, needle)
	if i < 0 {
		return max(0, len(buf)-len(needle)+1), false
	}
	quoted := false
	n, done := f.Skip(buf[i+len(needle):], &quoted)
	if !done {
		return i, false
	}
	return i + len(needle) + n, true
}

// JSONLog reads log_destination=jsonlog (PostgreSQL 15+, and Cloudberry
// builds that took it): one object per line.
type JSONLog struct{ lineFormat }

// Name implements LogFormat.
func (JSONLog) Name() string { return "jsonlog" }

// Parse implements LogFormat.
func (JSONLog) Parse(entry []byte) (Record, bool) {
	var e struct {
		PID       *int64  `json:"pid"`
		Message   *string `json:"message"`
		Timestamp string  `json:"timestamp"`
		SessionID string  `json:"session_id"`
		Severity  string  `json:"error_severity"`
		SQLState  string  `json:"state_code"`
	}
	if err := json.Unmarshal(entry, &e); err != nil || e.PID == nil || e.Message == nil {
		return Record{}, false
	}
	return Record{PID: *e.PID, Message: *e.Message, Time: logTime(e.Timestamp), Severity: e.Severity, SQLState: e.SQLState,
		SessionStart: sessionIDStart(e.SessionID, *e.PID)}, true
}

// CSVLog reads PostgreSQL's log_destination=csvlog.
type CSVLog struct{ csvFormat }

// csvlog columns (the same from PostgreSQL 9.0 through 17).
const (
	csvTime      = 0
	csvPID       = 3
	csvSessionID = 5
	csvSeverity  = 11
	csvSQLState  = 12
	csvMessage   = 13
)

// Name implements LogFormat.
func (CSVLog) Name() string { return "csvlog" }

// Parse implements LogFormat.
func (CSVLog) Parse(entry []byte) (Record, bool) {
	fields, ok := csvFields(entry)
	if !ok || len(fields) <= csvMessage {
		return Record{}, false
	}
	pid, err := strconv.ParseInt(fields[csvPID], 10, 64)
	if err != nil {
		return Record{}, false
	}
	return Record{PID: pid, Message: fields[csvMessage], Time: logTime(fields[csvTime]), Severity: fields[csvSeverity],
		SQLState: fields[csvSQLState], SessionStart: sessionIDStart(fields[csvSessionID], pid)}, true
}

// logTime reads a log line's time ("2026-11-28 16:00:00.123 UTC"; Greenplum
// writes microseconds). A zone abbreviation is read in the agent's own zone
// (the server's log_timezone is the host's as a rule); zero when unreadable.
func logTime(v string) time.Time {
	for _, layout := range []string{"2006-01-02 15:04:05.999999999 MST", "2006-01-02 15:04:05.999999999 -07", "2006-01-02 15:04:05.999999999 -0700",
		"2006-01-02 15:04:05 MST", "2006-01-02 15:04:05 -07"} {
		if t, err := time.ParseInLocation(layout, v, time.Local); err == nil {
			return t
		}
	}
	return time.Time{}
}

// sessionIDStart reads the start from PostgreSQL's session id, "%lx.%x" of
// the backend's start (unix seconds) and its pid; zero unless the pid is
// the record's.
func sessionIDStart(id string, pid int64) time.Time {
	start, p, ok := strings.Cut(id, ".")
	if !ok || len(start) > 16 || len(p) > 8 {
		return time.Time{}
	}
	sec, err1 := strconv.ParseInt(start, 16, 64)
	idPID, err2 := strconv.ParseInt(p, 16, 64)
	if err1 != nil || err2 != nil || idPID != pid || sec <= 0 {
		return time.Time{}
	}
	return time.Unix(sec, 0)
}

func csvFields(entry []byte) ([]string, bool) {
	r := csv.NewReader(bytes.NewReader(entry))
	r.FieldsPerRecord = -1
	fields, err := r.Read()
	return fields, err == nil
}

// GreenplumCSVLog reads the log Greenplum's logging collector writes with
// gp_log_format=csv (the default of Greenplum 6 and 7 and Cloudberry): 30
// columns, the process as p<pid> and its thread as th<n>.
type GreenplumCSVLog struct{ csvFormat }

// The Greenplum layout's columns (elog.c and syslogger.c of Greenplum 6).
const (
	gpColumns      = 30
	gpTime         = 0
	gpPID          = 3
	gpThread       = 4
	gpSessionStart = 7
	gpSession      = 9  // con<N>
	gpCommand      = 10 // cmd<M>
	gpSegment      = 11 // seg<N>
	gpSeverity     = 16
	gpSQLState     = 17
	gpMessage      = 18
)

var gpThreadRe = regexp.MustCompile(`^th-?\d+$`)

// Name implements LogFormat.
func (GreenplumCSVLog) Name() string { return dialect.LogGreenplumCSV }

// Parse implements LogFormat.
func (GreenplumCSVLog) Parse(entry []byte) (Record, bool) {
	fields, ok := csvFields(entry)
	if !ok || len(fields) != gpColumns || !gpThreadRe.MatchString(fields[gpThread]) {
		return Record{}, false
	}
	digits, ok := strings.CutPrefix(fields[gpPID], "p")
	if !ok {
		return Record{}, false
	}
	pid, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || pid <= 0 {
		return Record{}, false
	}
	seg, ok := prefixedInt(fields[gpSegment], "seg")
	if !ok {
		seg = math.MaxInt32 // no segment's: never taken for the coordinator's
	}
	session, _ := prefixedInt(fields[gpSession], "con")
	command, _ := prefixedInt(fields[gpCommand], "cmd")
	return Record{PID: pid, Message: fields[gpMessage], Time: logTime(fields[gpTime]), Severity: fields[gpSeverity],
		SQLState: fields[gpSQLState], SessionStart: logTime(fields[gpSessionStart]), Session: session, CommandCount: command,
		Segment: seg, Greenplum: true}, true
}

// prefixedInt reads Greenplum's "con14", "cmd5", "seg-1"; ok is false for
// another text (an empty field is 0, not ok).
func prefixedInt(v, prefix string) (int64, bool) {
	digits, ok := strings.CutPrefix(v, prefix)
	if !ok || len(digits) == 0 || len(digits) > 11 {
		return 0, false
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	return n, err == nil
}

// ErrPrefixWithoutPID says a stderr log cannot be read: nothing in its
// lines tells which process wrote them.
var ErrPrefixWithoutPID = errors.New("log_line_prefix has no %p, so stderr log lines do not say which process wrote them; add %p to log_line_prefix " +
	"(or log to jsonlog or csvlog)")

// ErrClientFieldBeforePID says a client could forge whole stderr lines: it
// chooses a field that log_line_prefix writes before the pid.
var ErrClientFieldBeforePID = errors.New("log_line_prefix writes a field a client chooses before %p, so a client could write a line that looks like " +
	"another process's; put %p before it (for example '%m [%p] %q%u@%d ') or log to jsonlog or csvlog")

// escape is what the server writes for one log_line_prefix escape.
type escape struct {
	pattern string
	client  bool // a client chooses the text
}

// prefixEscapes are PostgreSQL's log_line_prefix escapes (elog.c), each as
// the server writes it. Any other escape is taken as one a client chooses.
var prefixEscapes = map[byte]escape{
	'a': {`.*?`, true}, // application_name
	'u': {`.*?`, true}, // user name, as the client sent it, even before authentication
	'd': {`.*?`, true}, // database name, likewise
	'h': {`.*?`, true}, // host, a DNS name with log_hostname
	'r': {`.*?`, true}, // host and port
	'b': {`[^\t]*?`, false},
	'i': {`[^\t]*?`, false},
	'm': {`\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}(?: [^ ]*)?`, false},
	't': {`\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?: [^ ]*)?`, false},
	's': {`\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?: [^ ]*)?`, false},
	'n': {`\d+\.\d{3}`, false},
	'p': {`\d+`, false},
	'P': {`\d*`, false},
	'l': {`\d+`, false},
	'c': {`[0-9a-f]+\.[0-9a-f]+`, false},
	'v': {`(?:\d+/\d+)?`, false},
	'x': {`\d+`, false},
	'e': {`[0-9A-Z]{5}`, false},
	'Q': {`-?\d+`, false},
}

// StderrLog reads log_destination=stderr lines written with one log_line_prefix.
type StderrLog struct {
	lineFormat
	prefix string
	re     *regexp.Regexp
}

// NewStderrLog compiles a log_line_prefix; it must contain %p, and no field
// a client chooses may come before it.
func NewStderrLog(logLinePrefix string) (*StderrLog, error) {
	var pattern strings.Builder
	pattern.WriteString(`^`)
	var lit strings.Builder
	flush := func() {
		pattern.WriteString(regexp.QuoteMeta(lit.String()))
		lit.Reset()
	}
	hasPID, optional := false, false
	var clientFirst byte // a client's field met before %p
	p := logLinePrefix
	for i := 0; i < len(p); i++ {
		if p[i] != '%' || i+1 >= len(p) {
			lit.WriteByte(p[i])
			continue
		}
		i++
		// An optional padding such as %-10p or %10p.
		padded := false
		for i < len(p) && (p[i] == '-' || (p[i] >= '0' && p[i] <= '9')) {
			i, padded = i+1, true
		}
		if i >= len(p) {
			break
		}
		c := p[i]
		switch c {
		case '%':
			lit.WriteByte('%')
			continue
		case 'q':
			// Non-session processes stop the prefix here.
			flush()
			pattern.WriteString(`(?:`)
			optional = true
			continue
		}
		e, known := prefixEscapes[c]
		if !known {
			e = escape{`.*?`, true}
		}
		if e.client && !hasPID && clientFirst == 0 {
			clientFirst = c
		}
		if c == 'p' && !hasPID {
			e.pattern = `(` + e.pattern + `)`
			hasPID = true
		}
		flush()
		if padded {
			pattern.WriteString(` *` + e.pattern + ` *`)
		} else {
			pattern.WriteString(e.pattern)
		}
	}
	flush()
	if optional {
		pattern.WriteString(`)?`)
	}
	if !hasPID {
		return nil, fmt.Errorf("log_line_prefix %q: %w", logLinePrefix, ErrPrefixWithoutPID)
	}
	if clientFirst != 0 {
		return nil, fmt.Errorf("log_line_prefix %q: %%%c: %w", logLinePrefix, clientFirst, ErrClientFieldBeforePID)
	}
	// The severity is translated, its "%s:  " separator is not.
	pattern.WriteString(`[^:]*:  (.*)$`)
	re, err := regexp.Compile(pattern.String())
	if err != nil {
		return nil, fmt.Errorf("log_line_prefix %q: %w", logLinePrefix, err)
	}
	return &StderrLog{prefix: logLinePrefix, re: re}, nil
}

// Name implements LogFormat.
func (*StderrLog) Name() string { return "stderr" }

// Parse implements LogFormat. The server writes every further line of a
// message or statement after a tab, so such a line is never a record.
func (s *StderrLog) Parse(entry []byte) (Record, bool) {
	if len(entry) > 0 && entry[0] == '\t' {
		return Record{}, false
	}
	m := s.re.FindSubmatch(entry)
	if m == nil {
		return Record{}, false
	}
	pid, err := strconv.ParseInt(string(m[1]), 10, 64)
	if err != nil {
		return Record{}, false
	}
	return Record{PID: pid, Message: string(m[2])}, true
}
