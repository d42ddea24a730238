package top

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"k8s.io/apimachinery/pkg/util/duration"
)

// Theme styles whole lines of the screen. PlainTheme leaves them as they
// are (golden tests, dumb terminals).
type Theme struct {
	Title, Section, Header, Warn, Bad, Dim func(string) string
}

// PlainTheme styles nothing.
func PlainTheme() Theme {
	id := func(s string) string { return s }
	return Theme{Title: id, Section: id, Header: id, Warn: id, Bad: id, Dim: id}
}

// ColorTheme styles with lipgloss through r (which knows the terminal's
// colour profile).
func ColorTheme(r *lipgloss.Renderer) Theme {
	st := func(s lipgloss.Style) func(string) string { return func(x string) string { return s.Render(x) } }
	return Theme{
		Title:   st(r.NewStyle().Bold(true).Foreground(lipgloss.Color("12"))),
		Section: st(r.NewStyle().Bold(true)),
		Header:  st(r.NewStyle().Faint(true)),
		Warn:    st(r.NewStyle().Foreground(lipgloss.Color("11"))),
		Bad:     st(r.NewStyle().Foreground(lipgloss.Color("9"))),
		Dim:     st(r.NewStyle().Faint(true)),
	}
}

// Options shape a rendering.
type Options struct {
	// Width cuts every line (0: no limit).
	Width int
	// MaxPending caps the pending-pod rows (0: all); the rest are counted.
	MaxPending int
	Theme      Theme
}

// Screen is a rendered Snapshot: Header stays on top, Body scrolls.
type Screen struct {
	Header []string
	Body   []string
}

// Render lays out s. Every line is at most opts.Width cells wide.
func Render(s Snapshot, opts Options) Screen {
	th := opts.Theme
	if th.Title == nil {
		th = PlainTheme()
	}
	r := renderer{w: opts.Width, th: th, now: s.Time}
	r.header(s)
	r.pools(s)
	r.pending(s, opts.MaxPending)
	r.disruptions(s)
	for _, p := range s.NodePools {
		r.nodes(p)
	}
	r.prices(s)
	return Screen{Header: r.head, Body: r.body}
}

// Frame is what a terminal of width x height shows of sc with the body
// scrolled down offset lines and footer on the last line.
func Frame(sc Screen, width, height, offset int, footer string) string {
	lines := slices.Clone(sc.Header)
	room := max(height-len(lines)-1, 0)
	offset = ClampOffset(sc, height, offset)
	end := min(offset+room, len(sc.Body))
	lines = append(lines, sc.Body[offset:end]...)
	for len(lines) < height-1 {
		lines = append(lines, "")
	}
	if height > 0 {
		lines = append(lines, cut(footer, width))
	}
	if len(lines) > height {
		lines = lines[:height]
	}
	return strings.Join(lines, "\n")
}

// ClampOffset keeps a scroll offset within the body.
func ClampOffset(sc Screen, height, offset int) int {
	room := max(height-len(sc.Header)-1, 0)
	return max(min(offset, len(sc.Body)-room), 0)
}

type renderer struct {
	w          int
	th         Theme
	now        time.Time
	head, body []string
}

func (r *renderer) line(dst *[]string, style func(string) string, s string) {
	*dst = append(*dst, style(cut(s, r.w)))
}

func (r *renderer) header(s Snapshot) {
	t := s.Totals
	title := "joiner top"
	if s.Cluster != "" {
		title += " · " + s.Cluster
	}
	title += " · " + s.Time.UTC().Format("2006-01-02 15:04:05 UTC")
	r.line(&r.head, r.th.Title, title)
	nodes := fmt.Sprintf("Nodes %d", t.Nodes)
	if t.Launching > 0 {
		nodes += fmt.Sprintf(" (+%d launching)", t.Launching)
	}
	cost := fmt.Sprintf("Cost %s/h  %s/month", money(t.Cost.PerHour, t.Cost.Currency, 4), money(t.Cost.PerMonth, t.Cost.Currency, 2))
	if t.Cost.Unpriced > 0 {
		cost += fmt.Sprintf("  (%d unpriced)", t.Cost.Unpriced)
	}
	r.line(&r.head, id, fmt.Sprintf("%s   Pods %d   Pending %d   Disrupting %d   %s", nodes, t.Pods, t.Pending, t.Disrupting, cost))
	r.line(&r.head, id, fmt.Sprintf("CPU     %s %5.1f%%  %s / %s cores requested", bar(t.CPU.Percent(), 30), t.CPU.Percent(), cpu(t.CPU.Requested), cpu(t.CPU.Allocatable)))
	r.line(&r.head, id, fmt.Sprintf("Memory  %s %5.1f%%  %s / %s requested", bar(t.Memory.Percent(), 30), t.Memory.Percent(), mem(t.Memory.Requested), mem(t.Memory.Allocatable)))
	legend := "$/h: on-demand list prices; ~ spot price modelled from on-demand (not live); ? price unknown, left out of the totals"
	r.line(&r.head, r.th.Dim, legend)
	for i, w := range s.Warnings {
		if i == 3 {
			r.line(&r.head, r.th.Warn, fmt.Sprintf("! and %d more warnings", len(s.Warnings)-3))
			break
		}
		r.line(&r.head, r.th.Warn, "! "+flat(w))
	}
	r.head = append(r.head, "")
}

func (r *renderer) section(title string) {
	if len(r.body) > 0 {
		r.body = append(r.body, "")
	}
	r.line(&r.body, r.th.Section, title)
}

func (r *renderer) table(cols []column, rows [][]string, style func(i int) func(string) string) {
	head, lines := table(cols, rows)
	r.line(&r.body, r.th.Header, head)
	for i, l := range lines {
		st := id
		if style != nil {
			st = style(i)
		}
		r.line(&r.body, st, l)
	}
}

func (r *renderer) pools(s Snapshot) {
	r.section(fmt.Sprintf("NODEPOOLS (%d)", len(s.NodePools)))
	if len(s.NodePools) == 0 {
		r.line(&r.body, r.th.Dim, "none")
		return
	}
	cols := []column{{"NODEPOOL", false}, {"NODES", true}, {"LAUNCHING", true}, {"PODS", true}, {"CPU", true}, {"CPU%", true},
		{"MEMORY", true}, {"MEM%", true}, {"$/H", true}, {"$/MONTH", true}, {"LIMITS", false}}
	var rows [][]string
	for _, p := range s.NodePools {
		t := p.Totals
		name := p.Name
		if !p.Exists && p.Name != NoNodePool {
			name += " (no NodePool)"
		}
		perHour := money(t.Cost.PerHour, t.Cost.Currency, 4)
		if t.Cost.Unpriced > 0 {
			perHour += fmt.Sprintf(" +%d?", t.Cost.Unpriced)
		}
		rows = append(rows, []string{name, strconv.Itoa(t.Nodes), strconv.Itoa(t.Launching), strconv.Itoa(t.Pods),
			cpu(t.CPU.Requested) + "/" + cpu(t.CPU.Allocatable), pct(t.CPU), mem(t.Memory.Requested) + "/" + mem(t.Memory.Allocatable), pct(t.Memory),
			perHour, money(t.Cost.PerMonth, t.Cost.Currency, 2), limits(p.Limits)})
	}
	r.table(cols, rows, nil)
}

func (r *renderer) pending(s Snapshot, maxRows int) {
	r.section(fmt.Sprintf("PENDING PODS (%d)", len(s.Pending)))
	if len(s.Pending) == 0 {
		r.line(&r.body, r.th.Dim, "none")
		return
	}
	shown := s.Pending
	if maxRows > 0 && len(shown) > maxRows {
		shown = shown[:maxRows]
	}
	cols := []column{{"POD", false}, {"AGE", true}, {"CPU", true}, {"MEMORY", true}, {"REASON", false}, {"FROM", false}, {"MESSAGE", false}}
	var rows [][]string
	for _, p := range shown {
		msg := flat(p.Message)
		if p.NominatedNode != "" {
			msg = "nominated node " + p.NominatedNode + "; " + msg
		}
		rows = append(rows, []string{p.Namespace + "/" + p.Name, r.age(p.Created), cpu(p.CPU), mem(p.Memory), p.Reason, dash(p.Source), msg})
	}
	r.table(cols, rows, nil)
	if n := len(s.Pending) - len(shown); n > 0 {
		r.line(&r.body, r.th.Dim, fmt.Sprintf("... and %d more (joiner top -o json lists them all)", n))
	}
}

func (r *renderer) disruptions(s Snapshot) {
	r.section(fmt.Sprintf("DISRUPTION IN PROGRESS (%d)", len(s.Disruptions)))
	if len(s.Disruptions) == 0 {
		r.line(&r.body, r.th.Dim, "none")
		return
	}
	cols := []column{{"NODECLAIM", false}, {"NODE", false}, {"NODEPOOL", false}, {"INSTANCE TYPE", false}, {"REASON", false},
		{"DELETING", false}, {"AGE", true}, {"MESSAGE", false}}
	var rows [][]string
	for _, d := range s.Disruptions {
		age := "-"
		if d.Since != nil {
			age = r.age(*d.Since)
		}
		rows = append(rows, []string{dash(d.NodeClaim), dash(d.Node), d.NodePool, dash(d.InstanceType), d.Reason, yesNo(d.Deleting), age, flat(d.Message)})
	}
	r.table(cols, rows, func(int) func(string) string { return r.th.Warn })
}

func (r *renderer) nodes(p Pool) {
	t := p.Totals
	title := fmt.Sprintf("NODEPOOL %s · %s", p.Name, plural(t.Nodes, "node"))
	if t.Launching > 0 {
		title += fmt.Sprintf(" (+%d launching)", t.Launching)
	}
	title += fmt.Sprintf(" · %s · %s/h", plural(t.Pods, "pod"), money(t.Cost.PerHour, t.Cost.Currency, 4))
	r.section(title)
	if len(p.Nodes) == 0 {
		r.line(&r.body, r.th.Dim, "no nodes")
		return
	}
	cols := []column{{"NODE", false}, {"INSTANCE TYPE", false}, {"CAPACITY", false}, {"ZONE", false}, {"$/H", true},
		{"CPU", true}, {"CPU%", false}, {"MEMORY", true}, {"MEM%", false}, {"PODS", true}, {"STATUS", false}, {"AGE", true}}
	var rows [][]string
	for _, n := range p.Nodes {
		cpuCol, cpuPct, memCol, memPct, pods := "-", "-", "-", "-", "-"
		if n.Registered {
			cpuCol, memCol = cpu(n.CPU.Requested)+"/"+cpu(n.CPU.Allocatable), mem(n.Memory.Requested)+"/"+mem(n.Memory.Allocatable)
			cpuPct, memPct = bar(n.CPU.Percent(), 10)+" "+pct(n.CPU), bar(n.Memory.Percent(), 10)+" "+pct(n.Memory)
			pods = fmt.Sprintf("%d/%d", n.Pods, n.PodCapacity)
		}
		rows = append(rows, []string{n.Name, dash(n.InstanceType), dash(n.CapacityType), dash(n.Zone), nodePrice(n),
			cpuCol, cpuPct, memCol, memPct, pods, n.Status, r.age(n.Created)})
	}
	r.table(cols, rows, func(i int) func(string) string {
		switch p.Nodes[i].Status {
		case StatusNotReady, StatusDeleting:
			return r.th.Bad
		case StatusDisrupting, StatusInterrupted, StatusCordoned:
			return r.th.Warn
		}
		return id
	})
}

func (r *renderer) prices(s Snapshot) {
	if len(s.PriceNotes) == 0 {
		return
	}
	r.section("PRICES")
	for _, n := range s.PriceNotes {
		r.line(&r.body, r.th.Dim, n)
	}
}

func (r *renderer) age(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return duration.HumanDuration(r.now.Sub(t))
}

func nodePrice(n Node) string {
	switch {
	case !n.Price.Known && !n.Registered:
		return "-"
	case !n.Price.Known:
		return "?"
	case n.Price.Source == SourceSpotModel:
		return "~" + strconv.FormatFloat(n.Price.PerHour, 'f', 4, 64)
	}
	return strconv.FormatFloat(n.Price.PerHour, 'f', 4, 64)
}

type column struct {
	title string
	right bool
}

// table aligns rows under cols, two spaces apart, trailing spaces cut.
func table(cols []column, rows [][]string) (string, []string) {
	w := make([]int, len(cols))
	for i, c := range cols {
		w[i] = ansi.StringWidth(c.title)
	}
	for _, row := range rows {
		for i, cell := range row {
			w[i] = max(w[i], ansi.StringWidth(cell))
		}
	}
	format := func(cells []string) string {
		var b strings.Builder
		for i, cell := range cells {
			if i > 0 {
				b.WriteString("  ")
			}
			pad := strings.Repeat(" ", w[i]-ansi.StringWidth(cell))
			if cols[i].right {
				b.WriteString(pad + cell)
			} else {
				b.WriteString(cell + pad)
			}
		}
		return strings.TrimRight(b.String(), " ")
	}
	titles := make([]string, len(cols))
	for i, c := range cols {
		titles[i] = c.title
	}
	out := make([]string, len(rows))
	for i, row := range rows {
		out[i] = format(row)
	}
	return format(titles), out
}

func id(s string) string { return s }

// cut shortens s to width cells (0: no limit), marking the cut with "…".
func cut(s string, width int) string {
	if width <= 0 || ansi.StringWidth(s) <= width {
		return s
	}
	return ansi.Truncate(s, width, "…")
}

// flat puts a message on one line.
func flat(s string) string { return strings.Join(strings.Fields(s), " ") }

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// bar is a gauge of width cells for a percentage.
func bar(percent float64, width int) string {
	n := int(percent/100*float64(width) + 0.5)
	n = max(min(n, width), 0)
	return strings.Repeat("█", n) + strings.Repeat("░", width-n)
}

func pct(u Usage) string {
	if u.Allocatable <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", u.Percent())
}

// cpu formats millicores as cores: 2 decimals under 10, 1 under 100,
// none above, trailing zeros dropped.
func cpu(milli int64) string {
	c := float64(milli) / 1000
	prec := 0
	switch {
	case c < 10:
		prec = 2
	case c < 100:
		prec = 1
	}
	return trimFloat(c, prec)
}

// mem formats bytes in binary units with one decimal (Ki, Mi, Gi, Ti).
func mem(b int64) string {
	units := []string{"Ki", "Mi", "Gi", "Ti", "Pi"}
	if b < 1024 {
		return strconv.FormatInt(b, 10)
	}
	v, u := float64(b)/1024, 0
	for v >= 1024 && u < len(units)-1 {
		v /= 1024
		u++
	}
	prec := 1
	if v >= 100 {
		prec = 0
	}
	return trimFloat(v, prec) + units[u]
}

func trimFloat(f float64, prec int) string {
	s := strconv.FormatFloat(f, 'f', prec, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// money formats an amount with thousands separators: $1,234.56 for USD,
// else "CNY 1,234.56".
func money(v float64, currency string, prec int) string {
	s := strconv.FormatFloat(v, 'f', prec, 64)
	whole, frac, _ := strings.Cut(s, ".")
	var b strings.Builder
	for i, c := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if frac != "" {
		b.WriteString("." + frac)
	}
	if currency == "" || currency == "USD" {
		return "$" + b.String()
	}
	return currency + " " + b.String()
}

func limits(l map[string]string) string {
	if len(l) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + l[k]
	}
	return strings.Join(parts, ",")
}
