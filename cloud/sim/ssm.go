package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// serveSSM answers the SSM JSON protocol; only GetParameter is simulated.
func (s *Sim) serveSSM(w http.ResponseWriter, target string, body []byte) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	fail := func(status int, typ, msg string) {
		w.Header().Set("X-Amzn-ErrorType", typ)
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]string{"__type": typ, "message": msg})
	}
	if target != "AmazonSSM.GetParameter" {
		fail(http.StatusBadRequest, "UnknownOperationException", fmt.Sprintf("operation %s is not simulated", target))
		return
	}
	var in struct {
		Name string `json:"Name"`
	}
	if err := json.Unmarshal(body, &in); err != nil || in.Name == "" {
		fail(http.StatusBadRequest, "ValidationException", "Name is required")
		return
	}
	s.mu.Lock()
	s.calls["GetParameter"]++
	v, ok := s.cfg.Parameters[in.Name]
	s.mu.Unlock()
	if !ok {
		fail(http.StatusBadRequest, "ParameterNotFound", fmt.Sprintf("Parameter %s not found.", in.Name))
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"Parameter": map[string]any{
		"Name": in.Name, "Type": "String", "Value": v, "Version": 1, "DataType": "aws:ec2:image",
		"ARN": "arn:aws:ssm:" + s.cfg.Region + "::parameter" + in.Name,
	}})
}
