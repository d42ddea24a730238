package sim

import (
	"fmt"
	"net/http"
)

// serveEKS answers the EKS REST API (only DescribeCluster is simulated).
func (s *Sim) serveEKS(w http.ResponseWriter, r *http.Request) {
	writeJSONError(w, http.StatusBadRequest, "InvalidRequestException", fmt.Sprintf("%s %s is not simulated", r.Method, r.URL.Path))
}
