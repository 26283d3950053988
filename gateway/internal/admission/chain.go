package admission

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
)

// Mutator is a plugin of the mutating phase.
type Mutator interface {
	Admit(ctx context.Context, a *Attributes) error
}

// Validator is a plugin of the validating phase.
type Validator interface {
	Validate(ctx context.Context, a *Attributes) error
}

// Finisher learns how a write ended: stored is the stored object (nil
// when err is not nil).
type Finisher interface {
	Finish(ctx context.Context, a *Attributes, stored runtime.Object, err error)
}

// Chain runs plugins in order: every Mutator, then every Validator.
// A plugin may be both (kube-apiserver's LimitRanger is).
type Chain []any

// Admit runs the mutating phase.
func (c Chain) Admit(ctx context.Context, a *Attributes) error {
	for _, p := range c {
		if m, ok := p.(Mutator); ok {
			if err := m.Admit(ctx, a); err != nil {
				return err
			}
		}
	}
	return nil
}

// Validate runs the validating phase. When it fails, what plugins
// charged is undone.
func (c Chain) Validate(ctx context.Context, a *Attributes) error {
	for _, p := range c {
		if v, ok := p.(Validator); ok {
			if err := v.Validate(ctx, a); err != nil {
				a.failed()
				return err
			}
		}
	}
	return nil
}

// Finish tells the plugins how the write ended; a failed write undoes
// what they charged.
func (c Chain) Finish(ctx context.Context, a *Attributes, stored runtime.Object, err error) {
	if err != nil {
		a.failed()
	}
	for _, p := range c {
		if f, ok := p.(Finisher); ok {
			f.Finish(ctx, a, stored, err)
		}
	}
}
