package volumes

import (
	"context"
	"fmt"
	"os"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
)

// SystemdRunning reports whether this machine booted with systemd (the
// sd_booted test: /run/systemd/system exists).
func SystemdRunning() bool {
	st, err := os.Stat("/run/systemd/system")
	return err == nil && st.IsDir()
}

// DBusSystemd talks to systemd over D-Bus (go-systemd).
type DBusSystemd struct {
	conn *sddbus.Conn
}

// NewDBusSystemd connects to the system manager.
func NewDBusSystemd(ctx context.Context) (*DBusSystemd, error) {
	c, err := sddbus.NewSystemConnectionContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("connecting to systemd over D-Bus: %w", err)
	}
	return &DBusSystemd{conn: c}, nil
}

// Close closes the connection.
func (s *DBusSystemd) Close() { s.conn.Close() }

// Reload is daemon-reload.
func (s *DBusSystemd) Reload(ctx context.Context) error { return s.conn.ReloadContext(ctx) }

// EnableAndStart enables the unit file and starts the unit, waiting for the job.
func (s *DBusSystemd) EnableAndStart(ctx context.Context, path, name string) error {
	if _, _, err := s.conn.EnableUnitFilesContext(ctx, []string{path}, false, true); err != nil {
		return fmt.Errorf("enabling %s: %w", path, err)
	}
	return s.Start(ctx, name)
}

// Start starts the unit, waiting for the job.
func (s *DBusSystemd) Start(ctx context.Context, name string) error {
	ch := make(chan string, 1)
	if _, err := s.conn.StartUnitContext(ctx, name, "replace", ch); err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	select {
	case res := <-ch:
		if res != "done" {
			return fmt.Errorf("starting %s: job %s", name, res)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
