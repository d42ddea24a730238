package imds

import (
	"testing"
	"time"
)

func TestParseInstanceAction(t *testing.T) {
	for _, c := range []struct {
		name, body string
		want       InstanceAction
		wantErr    bool
	}{
		{"terminate", `{"action":"terminate","time":"2017-09-18T08:22:00Z"}`,
			InstanceAction{Action: "terminate", Time: time.Date(2017, 9, 18, 8, 22, 0, 0, time.UTC), RawTime: "2017-09-18T08:22:00Z"}, false},
		{"stop", `{"action": "stop", "time": "2017-09-18T08:22:00Z"}`,
			InstanceAction{Action: "stop", Time: time.Date(2017, 9, 18, 8, 22, 0, 0, time.UTC), RawTime: "2017-09-18T08:22:00Z"}, false},
		{"garbage", `<html>`, InstanceAction{}, true},
		{"no action", `{"time":"2017-09-18T08:22:00Z"}`, InstanceAction{}, true},
		{"no time", `{"action":"terminate"}`, InstanceAction{}, true},
		{"bad time", `{"action":"terminate","time":"soon"}`, InstanceAction{}, true},
		{"array", `[]`, InstanceAction{}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseInstanceAction([]byte(c.body))
			if (err != nil) != c.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, c.wantErr)
			}
			if !c.wantErr && (got.Action != c.want.Action || !got.Time.Equal(c.want.Time) || got.RawTime != c.want.RawTime) {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestParseScheduledEvents(t *testing.T) {
	body := `[{"NotBefore":"21 Jan 2019 09:00:43 GMT","Code":"system-reboot","Description":"scheduled reboot",
	  "EventId":"instance-event-0d59937288b749b32","NotAfter":"21 Jan 2019 09:17:23 GMT","State":"active"},
	 {"NotBefore":"22 Jan 2019 09:00:43 GMT","Code":"instance-stop","EventId":"e2","State":"canceled"}]`
	evs, err := ParseScheduledEvents([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 {
		t.Fatalf("got %d events, want 2", len(evs))
	}
	e := evs[0]
	if e.Code != "system-reboot" || e.EventID != "instance-event-0d59937288b749b32" || !e.Active() ||
		!e.NotBefore.Equal(time.Date(2019, 1, 21, 9, 0, 43, 0, time.UTC)) || !e.NotAfter.Equal(time.Date(2019, 1, 21, 9, 17, 23, 0, time.UTC)) {
		t.Errorf("event 0 = %+v", e)
	}
	if evs[1].Active() || !evs[1].NotAfter.IsZero() {
		t.Errorf("event 1 = %+v, want canceled with no NotAfter", evs[1])
	}
	for _, empty := range []string{"", "[]", " [ ] \n"} {
		if evs, err := ParseScheduledEvents([]byte(empty)); err != nil || len(evs) != 0 {
			t.Errorf("%q: %v, %v; want no events", empty, evs, err)
		}
	}
	for _, bad := range []string{`{}`, `[{"Code":"x","NotBefore":"yesterday"}]`, `[{"NotBefore":"21 Jan 2019 09:00:43 GMT"}]`, `[1]`} {
		if _, err := ParseScheduledEvents([]byte(bad)); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
}

func TestParseRebalanceAndLifecycle(t *testing.T) {
	r, err := ParseRebalance([]byte(`{"noticeTime":"2020-10-27T08:22:00Z"}`))
	if err != nil || !r.NoticeTime.Equal(time.Date(2020, 10, 27, 8, 22, 0, 0, time.UTC)) {
		t.Fatalf("rebalance: %+v, %v", r, err)
	}
	if _, err := ParseRebalance([]byte(`{}`)); err == nil {
		t.Error("rebalance without noticeTime: want an error")
	}
	if s, err := ParseLifecycleState([]byte("Terminated\n")); err != nil || s != "Terminated" {
		t.Errorf("lifecycle: %q, %v", s, err)
	}
	for _, bad := range []string{"", "  ", `{"a":1}`, "In Service"} {
		if _, err := ParseLifecycleState([]byte(bad)); err == nil {
			t.Errorf("lifecycle %q: want an error", bad)
		}
	}
}

func FuzzParseInstanceAction(f *testing.F) {
	f.Add([]byte(`{"action":"terminate","time":"2017-09-18T08:22:00Z"}`))
	f.Add([]byte(`{"action":"stop","time":"2017-09-18T08:22:00+02:00"}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := ParseInstanceAction(b)
		if err == nil && (a.Action == "" || a.Time.IsZero() && a.RawTime == "") {
			t.Fatalf("accepted %q as %+v", b, a)
		}
	})
}

func FuzzParseScheduledEvents(f *testing.F) {
	f.Add([]byte(`[{"NotBefore":"21 Jan 2019 09:00:43 GMT","Code":"system-reboot","EventId":"e1","State":"active"}]`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`[{"NotBefore":"2019-01-21T09:00:43Z","Code":"instance-stop","NotAfter":"2019-01-21T10:00:43Z"}]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		evs, err := ParseScheduledEvents(b)
		if err != nil {
			return
		}
		for _, e := range evs {
			if e.Code == "" {
				t.Fatalf("accepted an event without a code from %q", b)
			}
		}
	})
}

func FuzzParseRebalance(f *testing.F) {
	f.Add([]byte(`{"noticeTime":"2020-10-27T08:22:00Z"}`))
	f.Fuzz(func(t *testing.T, b []byte) { _, _ = ParseRebalance(b) })
}
