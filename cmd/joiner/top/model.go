package top

import (
	"context"
	"fmt"
	"time"

	tea "github.com/charmbracelet/bubbletea"
)

// Source takes a snapshot of the cluster; it may block until the caches
// have synced, and ends when ctx does.
type Source func(ctx context.Context) (Snapshot, error)

// Model is the live view: it takes a snapshot every Refresh, renders it
// to the terminal's width and scrolls the body with the arrow keys.
type Model struct {
	ctx     context.Context
	source  Source
	refresh time.Duration
	theme   Theme

	snap    *Snapshot
	err     error
	screen  Screen
	width   int
	height  int
	offset  int
	loading bool
	// ticks counts the refresh ticks scheduled; only the newest one
	// fetches, so a manual refresh (r) does not start a second chain.
	ticks int
}

// NewModel returns the view of source, refreshed every refresh.
func NewModel(ctx context.Context, source Source, refresh time.Duration, theme Theme) *Model {
	return &Model{ctx: ctx, source: source, refresh: refresh, theme: theme}
}

// maxPendingRows caps the pending pods on screen: the nodes stay in reach.
const maxPendingRows = 20

type snapshotMsg struct {
	snap Snapshot
	err  error
}

type tickMsg struct{ n int }

func (m *Model) fetch() tea.Cmd {
	m.loading = true
	return func() tea.Msg {
		s, err := m.source(m.ctx)
		return snapshotMsg{snap: s, err: err}
	}
}

// Init takes the first snapshot.
func (m *Model) Init() tea.Cmd { return m.fetch() }

// Update handles keys, resizes, snapshots and the refresh tick.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		m.render()
	case tea.KeyMsg:
		return m, m.key(msg.String())
	case snapshotMsg:
		m.loading = false
		m.err = msg.err
		if msg.err == nil {
			m.snap = &msg.snap
			m.render()
		}
		m.ticks++
		n := m.ticks
		return m, tea.Tick(m.refresh, func(time.Time) tea.Msg { return tickMsg{n: n} })
	case tickMsg:
		if msg.n == m.ticks && !m.loading {
			return m, m.fetch()
		}
	}
	return m, nil
}

func (m *Model) key(k string) tea.Cmd {
	page := max(m.height-len(m.screen.Header)-2, 1)
	switch k {
	case "q", "esc", "ctrl+c":
		return tea.Quit
	case "up", "k":
		m.offset--
	case "down", "j":
		m.offset++
	case "pgup", "b":
		m.offset -= page
	case "pgdown", " ", "f":
		m.offset += page
	case "home", "g":
		m.offset = 0
	case "end", "G":
		m.offset = len(m.screen.Body)
	case "r":
		if !m.loading {
			return m.fetch()
		}
	}
	m.offset = ClampOffset(m.screen, m.height, m.offset)
	return nil
}

func (m *Model) render() {
	if m.snap == nil {
		return
	}
	m.screen = Render(*m.snap, Options{Width: m.width, MaxPending: maxPendingRows, Theme: m.theme})
	m.offset = ClampOffset(m.screen, m.height, m.offset)
}

// View draws the screen.
func (m *Model) View() string {
	if m.height == 0 {
		return ""
	}
	if m.snap == nil {
		sc := Screen{Header: []string{m.theme.Title("joiner top"), "waiting for the cluster (nodes, pods, nodeclaims, nodepools)..."}}
		if m.err != nil {
			sc.Header = append(sc.Header, m.theme.Bad(cut("error: "+flat(m.err.Error()), m.width)))
		}
		return Frame(sc, m.width, m.height, 0, m.theme.Dim("q quit"))
	}
	room := max(m.height-len(m.screen.Header)-1, 0)
	last := min(m.offset+room, len(m.screen.Body))
	footer := fmt.Sprintf("q quit · ↑/↓ PgUp/PgDn Home/End scroll · r refresh · lines %d-%d of %d · every %s",
		min(m.offset+1, last), last, len(m.screen.Body), m.refresh)
	if m.err != nil {
		footer = "refresh failed: " + flat(m.err.Error()) + " · " + footer
		return Frame(m.screen, m.width, m.height, m.offset, m.theme.Bad(cut(footer, m.width)))
	}
	return Frame(m.screen, m.width, m.height, m.offset, m.theme.Dim(cut(footer, m.width)))
}
