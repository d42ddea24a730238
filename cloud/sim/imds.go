package sim

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// serveIMDS serves /imds/<instance-id>/latest/... like EC2's IMDS (and
// amazon-ec2-metadata-mock): PUT latest/api/token issues an IMDSv2 token,
// which every meta-data GET must carry (httpTokens required).
func (s *Sim) serveIMDS(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, "/imds/")
	id, p, _ := strings.Cut(rest, "/")
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.instances[id]
	if !ok || in.State == "terminated" {
		http.NotFound(w, r)
		return
	}
	if p == "latest/api/token" {
		if r.Method != http.MethodPut {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		ttl, err := strconv.Atoi(r.Header.Get("X-aws-ec2-metadata-token-ttl-seconds"))
		if err != nil || ttl < 1 || ttl > 21600 {
			http.Error(w, "bad X-aws-ec2-metadata-token-ttl-seconds", http.StatusBadRequest)
			return
		}
		var b [16]byte
		_, _ = rand.Read(b[:])
		tok := hex.EncodeToString(b[:])
		s.tokens[tok] = s.now().Add(time.Duration(ttl) * time.Second)
		w.Header().Set("X-aws-ec2-metadata-token-ttl-seconds", strconv.Itoa(ttl))
		_, _ = w.Write([]byte(tok))
		return
	}
	exp, ok := s.tokens[r.Header.Get("X-aws-ec2-metadata-token")]
	if !ok || s.now().After(exp) {
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
		return
	}
	if r.Method != http.MethodGet {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	md := map[string]string{
		"instance-id":                    in.ID,
		"instance-type":                  in.Type,
		"ami-id":                         in.ImageID,
		"local-ipv4":                     in.PrivateIP,
		"local-hostname":                 in.NodeName,
		"hostname":                       in.NodeName,
		"placement/availability-zone":    in.Zone,
		"placement/availability-zone-id": zoneID(in.Zone),
		"placement/region":               s.cfg.Region,
		"instance-life-cycle":            map[bool]string{true: "spot", false: "on-demand"}[in.Lifecycle == "spot"],
	}
	switch p {
	case "latest/meta-data/spot/instance-action":
		if in.Interrupted == nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"action": "terminate", "time": in.Interrupted.Format(time.RFC3339)})
		return
	case "latest/meta-data/spot/termination-time":
		if in.Interrupted == nil {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(in.Interrupted.Format(time.RFC3339)))
		return
	case "latest/dynamic/instance-identity/document":
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"instanceId": in.ID, "instanceType": in.Type,
			"availabilityZone": in.Zone, "region": s.cfg.Region, "imageId": in.ImageID, "privateIp": in.PrivateIP,
			"accountId": ownerID, "architecture": in.Arch})
		return
	case "latest/user-data":
		_, _ = w.Write(in.UserData)
		return
	}
	if v, ok := md[strings.TrimPrefix(p, "latest/meta-data/")]; ok && strings.HasPrefix(p, "latest/meta-data/") {
		_, _ = w.Write([]byte(v))
		return
	}
	http.NotFound(w, r)
}

// IMDSHandler serves one instance's IMDS at the root (/latest/...), the way
// EC2 and amazon-ec2-metadata-mock do: the SDK's IMDS client replaces the
// endpoint's path, so an agent needs an endpoint of its own.
func (s *Sim) IMDSHandler(id string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/imds/" + id + r.URL.Path
		s.serveIMDS(w, r2)
	})
}

// ServeIMDS serves an instance's IMDS on its own loopback port until ctx
// ends and returns its endpoint (http://127.0.0.1:PORT).
func (s *Sim) ServeIMDS(ctx context.Context, id string) (string, error) {
	s.mu.Lock()
	_, ok := s.instances[id]
	s.mu.Unlock()
	if !ok {
		return "", fmt.Errorf("instance %s: not found", id)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("IMDS listener for %s: %w", id, err)
	}
	srv := &http.Server{Handler: s.IMDSHandler(id), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	return "http://" + ln.Addr().String(), nil
}
