package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// maxParameterName is SSM's limit on a parameter name (with its path).
const maxParameterName = 2048

// serveSSM answers the SSM JSON protocol; only GetParameter is simulated
// (the call Karpenter's controller policy allows on /aws/service/*). The
// parameters are the config's: the AMI parameters AWS publishes
// (DefaultConfig) and whatever a config file adds.
func (s *Sim) serveSSM(w http.ResponseWriter, target string, body []byte) {
	var in struct {
		Name *string `json:"Name"`
	}
	if !decodeJSONCall(w, target, "AmazonSSM.GetParameter", body, &in) {
		return
	}
	switch {
	case in.Name == nil:
		writeJSONError(w, http.StatusBadRequest, "ValidationException",
			"1 validation error detected: Value null at 'name' failed to satisfy constraint: Member must not be null")
		return
	case len(*in.Name) == 0 || len(*in.Name) > maxParameterName:
		writeJSONError(w, http.StatusBadRequest, "ValidationException", fmt.Sprintf("1 validation error detected: Value '%s' at 'name' "+
			"failed to satisfy constraint: Member must have length between 1 and %d", *in.Name, maxParameterName))
		return
	}
	name := *in.Name
	s.mu.Lock()
	s.calls["GetParameter"]++
	v, ok := s.cfg.Parameters[name]
	s.mu.Unlock()
	if !ok {
		writeJSONError(w, http.StatusBadRequest, "ParameterNotFound", fmt.Sprintf("Parameter %s not found.", name))
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"Parameter": map[string]any{
		"Name": name, "Type": "String", "Value": v, "Version": 1, "DataType": "aws:ec2:image",
		"ARN": "arn:aws:ssm:" + s.cfg.Region + "::parameter" + name,
	}})
}
