package sim

import (
	"encoding/json"
	"net/http"
)

// writeJSONError writes an error of the AWS JSON protocols (SSM, SQS,
// Pricing; EKS's REST-JSON uses the same body).
func writeJSONError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("X-Amzn-ErrorType", typ)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": typ, "message": msg})
}
