package v1

import (
	"encoding/json"
	"fmt"
	"time"
)

// Never is the literal that disables a duration (expireAfter, consolidateAfter).
const Never = "Never"

// Duration is a Go duration that keeps the text it was written with, so a
// manifest round-trips byte for byte ("720h" stays "720h", not "720h0m0s").
// It accepts "Never" where the field allows it; validation decides where.
//
// Fields add the pattern they allow (with or without "Never").
//
// +kubebuilder:validation:Type=string
type Duration struct {
	// Duration is nil for "Never".
	Duration *time.Duration `json:"-"`
	// Raw is the text as written; empty when built in code.
	Raw string `json:"-"`
}

// NewDuration returns a Duration for d.
func NewDuration(d time.Duration) Duration { return Duration{Duration: &d} }

// NeverDuration returns the "Never" value.
func NeverDuration() Duration { return Duration{Raw: Never} }

// IsNever reports whether the value is "Never".
func (d Duration) IsNever() bool { return d.Duration == nil && d.Raw == Never }

// IsZero reports whether the value was never set.
func (d Duration) IsZero() bool { return d.Duration == nil && d.Raw == "" }

// String returns the value as it would be written.
func (d Duration) String() string {
	if d.Raw != "" {
		return d.Raw
	}
	if d.Duration == nil {
		return ""
	}
	return d.Duration.String()
}

// ParseDuration parses s as a Duration; "Never" is accepted.
func ParseDuration(s string) (Duration, error) {
	if s == Never {
		return NeverDuration(), nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return Duration{}, fmt.Errorf("invalid duration %q: %w", s, err)
	}
	return Duration{Duration: &v, Raw: s}, nil
}

// MarshalJSON writes the original text, or Go's form for values built in code.
func (d Duration) MarshalJSON() ([]byte, error) {
	if d.IsZero() {
		return []byte("null"), nil
	}
	return json.Marshal(d.String())
}

// UnmarshalJSON reads a duration string or "Never".
func (d *Duration) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*d = Duration{}
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string like \"720h\" or \"Never\": %w", err)
	}
	v, err := ParseDuration(s)
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// DeepCopyInto copies d into out.
func (d *Duration) DeepCopyInto(out *Duration) {
	*out = *d
	if d.Duration != nil {
		v := *d.Duration
		out.Duration = &v
	}
}

// DeepCopy returns a copy of d.
func (d *Duration) DeepCopy() *Duration {
	if d == nil {
		return nil
	}
	out := new(Duration)
	d.DeepCopyInto(out)
	return out
}
