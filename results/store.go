package results

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"time"

	// Register the pure Go SQLite driver as "sqlite".
	_ "modernc.org/sqlite"
)

// SchemaVersion is the version of the store's schema, kept in the SQLite
// file's user_version. Open refuses a file with another version.
const SchemaVersion = 1

// ErrNoRun is returned (wrapped) by Store.Run when no run has been stored yet.
var ErrNoRun = errors.New("no run recorded")

// schema creates the three tables of a store. Times are RFC 3339 text with
// nanoseconds in UTC; labels and env are JSON objects (NULL when empty); a
// NaN value is stored as NULL, since SQLite has no NaN.
const schema = `
CREATE TABLE run (
	id         INTEGER PRIMARY KEY CHECK (id = 1),
	experiment TEXT    NOT NULL,
	study      TEXT    NOT NULL,
	started    TEXT    NOT NULL,
	ended      TEXT    NOT NULL,
	complete   INTEGER NOT NULL,
	env        TEXT
);
CREATE TABLE trials (
	id         INTEGER PRIMARY KEY,
	experiment TEXT    NOT NULL,
	scenario   TEXT    NOT NULL,
	trial      INTEGER NOT NULL,
	status     TEXT    NOT NULL,
	error      TEXT    NOT NULL,
	started    TEXT    NOT NULL,
	ended      TEXT    NOT NULL,
	UNIQUE (experiment, scenario, trial)
);
CREATE TABLE samples (
	id         INTEGER PRIMARY KEY,
	experiment TEXT    NOT NULL,
	scenario   TEXT    NOT NULL,
	trial      INTEGER NOT NULL,
	probe      TEXT    NOT NULL,
	metric     TEXT    NOT NULL,
	value      REAL,
	unit       TEXT    NOT NULL,
	"time"     TEXT    NOT NULL,
	labels     TEXT
);
CREATE INDEX samples_by_trial ON samples (experiment, scenario, trial);
`

// Store is a results file: one SQLite database holding one run, its trials
// and all raw samples. A Store is safe for concurrent use; writes are
// serialised over a single connection.
type Store struct {
	db   *sql.DB
	path string
}

// Create makes a new results store at path. It fails if path already exists,
// so that the samples of two runs are never mixed in one file.
func Create(path string) (*Store, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create results store: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("create results store: %w", err)
	}
	s, err := open(path)
	if err != nil {
		_ = os.Remove(path)
		return nil, fmt.Errorf("create results store %s: %w", path, err)
	}
	err = s.tx(func(tx *sql.Tx) error {
		if _, err := tx.Exec(schema); err != nil {
			return err
		}
		_, err := tx.Exec(fmt.Sprintf("PRAGMA user_version = %d", SchemaVersion))
		return err
	})
	if err != nil {
		_ = s.db.Close()
		_ = os.Remove(path)
		return nil, fmt.Errorf("create results store %s: %w", path, err)
	}
	return s, nil
}

// Open opens an existing results store made by Create. It fails if path does
// not exist or is not a store of this SchemaVersion.
func Open(path string) (*Store, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("open results store: %w", err)
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("open results store %s: is a directory", path)
	}
	s, err := open(path)
	if err != nil {
		return nil, fmt.Errorf("open results store %s: %w", path, err)
	}
	var v int
	if err := s.db.QueryRow("PRAGMA user_version").Scan(&v); err != nil {
		_ = s.db.Close()
		return nil, fmt.Errorf("open results store %s: %w", path, err)
	}
	if v != SchemaVersion {
		_ = s.db.Close()
		return nil, fmt.Errorf("open results store %s: schema version %d, want %d (not an sfclab results file?)", path, v, SchemaVersion)
	}
	return s, nil
}

func open(path string) (*Store, error) {
	db, err := sql.Open("sqlite", path)
	if err != nil {
		return nil, err
	}
	// One connection: SQLite serialises writers anyway, and PRAGMAs set
	// below stay in force.
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	for _, p := range []string{"PRAGMA busy_timeout = 5000", "PRAGMA journal_mode = DELETE", "PRAGMA synchronous = FULL"} {
		if _, err := db.Exec(p); err != nil {
			_ = db.Close()
			return nil, err
		}
	}
	return &Store{db: db, path: path}, nil
}

// Path returns the file the store was created or opened at.
func (s *Store) Path() string { return s.path }

// Close closes the store. Everything put before is already on disk.
func (s *Store) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close results store %s: %w", s.path, err)
	}
	return nil
}

func (s *Store) tx(fn func(*sql.Tx) error) error {
	tx, err := s.db.Begin()
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// PutRun stores r as the store's run, replacing any run stored before (a
// store holds exactly one).
func (s *Store) PutRun(r Run) error {
	env, err := marshalMap(r.Env)
	if err != nil {
		return fmt.Errorf("put run: env: %w", err)
	}
	_, err = s.db.Exec(`INSERT OR REPLACE INTO run (id, experiment, study, started, ended, complete, env)
		VALUES (1, ?, ?, ?, ?, ?, ?)`,
		r.Experiment, r.Study, formatTime(r.Started), formatTime(r.Ended), r.Complete, env)
	if err != nil {
		return fmt.Errorf("put run: %w", err)
	}
	return nil
}

// Run returns the stored run, or an error wrapping ErrNoRun if PutRun was
// never called.
func (s *Store) Run() (Run, error) {
	var (
		r              Run
		started, ended string
		env            sql.NullString
	)
	err := s.db.QueryRow(`SELECT experiment, study, started, ended, complete, env FROM run WHERE id = 1`).
		Scan(&r.Experiment, &r.Study, &started, &ended, &r.Complete, &env)
	if errors.Is(err, sql.ErrNoRows) {
		return Run{}, fmt.Errorf("read run from %s: %w", s.path, ErrNoRun)
	}
	if err != nil {
		return Run{}, fmt.Errorf("read run from %s: %w", s.path, err)
	}
	if r.Started, err = parseTime(started); err != nil {
		return Run{}, fmt.Errorf("read run from %s: started: %w", s.path, err)
	}
	if r.Ended, err = parseTime(ended); err != nil {
		return Run{}, fmt.Errorf("read run from %s: ended: %w", s.path, err)
	}
	if r.Env, err = unmarshalMap(env); err != nil {
		return Run{}, fmt.Errorf("read run from %s: env: %w", s.path, err)
	}
	return r, nil
}

// PutTrial stores t. A trial is identified by its experiment, scenario and
// trial number: putting it again (for example once when it starts and once
// when it ends) updates it in place and keeps its position in Trials.
func (s *Store) PutTrial(t Trial) error {
	_, err := s.db.Exec(`INSERT INTO trials (experiment, scenario, trial, status, error, started, ended)
		VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (experiment, scenario, trial) DO UPDATE SET
			status = excluded.status, error = excluded.error,
			started = excluded.started, ended = excluded.ended`,
		t.Experiment, t.Scenario, t.Trial, t.Status, t.Error, formatTime(t.Started), formatTime(t.Ended))
	if err != nil {
		return fmt.Errorf("put trial %s/%s/%d: %w", t.Experiment, t.Scenario, t.Trial, err)
	}
	return nil
}

// Trials returns every stored trial in the order it was first put.
func (s *Store) Trials() ([]Trial, error) {
	rows, err := s.db.Query(`SELECT experiment, scenario, trial, status, error, started, ended FROM trials ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("read trials from %s: %w", s.path, err)
	}
	defer rows.Close()
	var out []Trial
	for rows.Next() {
		var (
			t              Trial
			started, ended string
		)
		if err := rows.Scan(&t.Experiment, &t.Scenario, &t.Trial, &t.Status, &t.Error, &started, &ended); err != nil {
			return nil, fmt.Errorf("read trials from %s: %w", s.path, err)
		}
		if t.Started, err = parseTime(started); err != nil {
			return nil, fmt.Errorf("read trials from %s: started: %w", s.path, err)
		}
		if t.Ended, err = parseTime(ended); err != nil {
			return nil, fmt.Errorf("read trials from %s: ended: %w", s.path, err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read trials from %s: %w", s.path, err)
	}
	return out, nil
}

// PutSamples appends samples in one transaction: either all of them are
// stored or, on error, none. Times are kept to the nanosecond (in UTC);
// a NaN value is stored as NULL and read back as NaN; ±Inf are kept.
func (s *Store) PutSamples(samples []Sample) error {
	if len(samples) == 0 {
		return nil
	}
	err := s.tx(func(tx *sql.Tx) error {
		stmt, err := tx.Prepare(`INSERT INTO samples (experiment, scenario, trial, probe, metric, value, unit, "time", labels)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`)
		if err != nil {
			return err
		}
		defer stmt.Close()
		for i, x := range samples {
			labels, err := marshalMap(x.Labels)
			if err != nil {
				return fmt.Errorf("sample %d: labels: %w", i, err)
			}
			value := sql.NullFloat64{Float64: x.Value, Valid: !math.IsNaN(x.Value)}
			if _, err := stmt.Exec(x.Experiment, x.Scenario, x.Trial, x.Probe, x.Metric, value, x.Unit, formatTime(x.Time), labels); err != nil {
				return fmt.Errorf("sample %d (%s/%s trial %d %s %s): %w", i, x.Experiment, x.Scenario, x.Trial, x.Probe, x.Metric, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("put %d samples: %w", len(samples), err)
	}
	return nil
}

// Samples returns every stored sample in insertion order. A sample stored
// without labels comes back with nil Labels.
func (s *Store) Samples() ([]Sample, error) {
	rows, err := s.db.Query(`SELECT experiment, scenario, trial, probe, metric, value, unit, "time", labels FROM samples ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("read samples from %s: %w", s.path, err)
	}
	defer rows.Close()
	var out []Sample
	for rows.Next() {
		var (
			x      Sample
			value  sql.NullFloat64
			ts     string
			labels sql.NullString
		)
		if err := rows.Scan(&x.Experiment, &x.Scenario, &x.Trial, &x.Probe, &x.Metric, &value, &x.Unit, &ts, &labels); err != nil {
			return nil, fmt.Errorf("read samples from %s: %w", s.path, err)
		}
		x.Value = math.NaN()
		if value.Valid {
			x.Value = value.Float64
		}
		if x.Time, err = parseTime(ts); err != nil {
			return nil, fmt.Errorf("read samples from %s: time: %w", s.path, err)
		}
		if x.Labels, err = unmarshalMap(labels); err != nil {
			return nil, fmt.Errorf("read samples from %s: labels: %w", s.path, err)
		}
		out = append(out, x)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read samples from %s: %w", s.path, err)
	}
	return out, nil
}

// formatTime renders t as RFC 3339 with nanoseconds in UTC, the text form
// every time column uses (it sorts chronologically).
func formatTime(t time.Time) string {
	return t.UTC().Format(time.RFC3339Nano)
}

func parseTime(s string) (time.Time, error) {
	return time.Parse(time.RFC3339Nano, s)
}

// marshalMap encodes m as a JSON object with sorted keys, or NULL when m is
// empty.
func marshalMap(m map[string]string) (sql.NullString, error) {
	if len(m) == 0 {
		return sql.NullString{}, nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return sql.NullString{}, err
	}
	return sql.NullString{String: string(b), Valid: true}, nil
}

func unmarshalMap(s sql.NullString) (map[string]string, error) {
	if !s.Valid || s.String == "" {
		return nil, nil
	}
	var m map[string]string
	if err := json.Unmarshal([]byte(s.String), &m); err != nil {
		return nil, err
	}
	if len(m) == 0 {
		return nil, nil
	}
	return m, nil
}
