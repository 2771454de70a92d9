package deploy

import (
	"errors"
	"fmt"
)

// undoStack holds the inverse of every step done so far; unwinding runs them newest first.
type undoStack struct {
	steps []undoStep
}

type undoStep struct {
	what string
	fn   func() error
}

// Push records the undo of a step just done.
func (u *undoStack) Push(what string, fn func() error) {
	u.steps = append(u.steps, undoStep{what, fn})
}

// unwind runs every undo step, newest first, and joins their errors.
func (u *undoStack) unwind() error {
	var errs []error
	for i := len(u.steps) - 1; i >= 0; i-- {
		if err := u.steps[i].fn(); err != nil {
			errs = append(errs, fmt.Errorf("undo %s: %w", u.steps[i].what, err))
		}
	}
	u.steps = nil
	return errors.Join(errs...)
}
