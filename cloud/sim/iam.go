package sim

import (
	"fmt"
	"net/http"
)

// iamVersion is the IAM Query API version; requests carrying it are IAM's.
const iamVersion = "2010-05-08"

// serveIAM answers the IAM Query API.
func (s *Sim) serveIAM(w http.ResponseWriter, reqID string, req Request) {
	writeError(w, http.StatusBadRequest, reqID, "InvalidAction", fmt.Sprintf("the action %s is not simulated", req.Action))
}
