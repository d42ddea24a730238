package sim

import (
	"crypto/sha256"
	"encoding/xml"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
)

// iamVersion is the IAM Query API version; requests carrying it are IAM's.
const iamVersion = "2010-05-08"

const iamNS = "https://iam.amazonaws.com/doc/2010-05-08/"

// IAM is the simulated account's identity and access management: the
// roles and instance profiles that exist, and the identity-based policy
// its callers hold (see Access).
type IAM struct {
	// Roles are the names of the account's roles. Empty: every role name
	// exists (a class's spec.role needs no config); set, AddRoleToInstanceProfile
	// and GetRole answer NoSuchEntity for other names.
	Roles []string `json:"roles,omitempty"`
	// InstanceProfiles exist from the start, as an operator made them.
	InstanceProfiles []InstanceProfile `json:"instanceProfiles,omitempty"`
	// PropagationDelay is how long a profile made by CreateInstanceProfile
	// stays unknown to EC2 (IAM is eventually consistent): a launch naming
	// it fails until then as a launch naming no profile does, with EC2's
	// "Invalid IAM Instance Profile name" (see profileCheck). Zero (the
	// default, which tests on a stopped clock need): visible at once. The
	// config's InstanceProfiles are visible from the start.
	PropagationDelay Duration `json:"propagationDelay,omitempty"`
	Access
}

// InstanceProfile is an IAM instance profile (at most one role, as in
// IAM).
type InstanceProfile struct {
	Name string            `json:"name"`
	Path string            `json:"path,omitempty"` // default "/"
	Role string            `json:"role,omitempty"`
	Tags map[string]string `json:"tags,omitempty"`
}

type profile struct {
	InstanceProfile
	ID      string
	Created time.Time
	// Visible is when EC2 launches can use it (IAM.PropagationDelay after
	// it was created).
	Visible time.Time
}

// IAM limits the sim enforces (IAM's quotas and input rules).
const (
	maxProfileTags = 50
	maxListItems   = 1000
)

var (
	iamNameRE = regexp.MustCompile(`^[\w+=,.@-]{1,128}$`)
	iamPathRE = regexp.MustCompile(`^(/|/[\x21-\x7E]*/)$`)
)

type iamHandler func(*Sim, Request) (any, *apiError)

var iamActions = map[string]iamHandler{
	"GetInstanceProfile":            (*Sim).getInstanceProfile,
	"CreateInstanceProfile":         (*Sim).createInstanceProfile,
	"TagInstanceProfile":            (*Sim).tagInstanceProfile,
	"AddRoleToInstanceProfile":      (*Sim).addRoleToInstanceProfile,
	"RemoveRoleFromInstanceProfile": (*Sim).removeRoleFromInstanceProfile,
	"DeleteInstanceProfile":         (*Sim).deleteInstanceProfile,
	"ListInstanceProfiles":          (*Sim).listInstanceProfiles,
	"GetRole":                       (*Sim).getRole,
}

// serveIAM answers the IAM Query API (instance profiles and GetRole) with
// IAM's XML shapes and error codes, after the caller's policy allows it.
func (s *Sim) serveIAM(w http.ResponseWriter, reqID string, req Request) {
	h, ok := iamActions[req.Action]
	if !ok {
		writeIAMError(w, reqID, &apiError{status: http.StatusBadRequest, code: "InvalidAction",
			msg: fmt.Sprintf("Could not find operation %s for version %s", req.Action, iamVersion)})
		return
	}
	s.mu.Lock()
	s.calls[req.Action]++
	s.last[req.Action] = req
	var out any
	aerr := s.authorize(req.principal, s.iamAuthRequests(req)).iamError()
	if aerr == nil {
		out, aerr = h(s, req)
	}
	s.mu.Unlock()
	if aerr != nil {
		writeIAMError(w, reqID, aerr)
		return
	}
	var b strings.Builder
	b.WriteString(xml.Header)
	enc := xml.NewEncoder(&b)
	start := xml.StartElement{Name: xml.Name{Local: req.Action + "Response"}, Attr: []xml.Attr{{Name: xml.Name{Local: "xmlns"}, Value: iamNS}}}
	_ = enc.EncodeToken(start)
	if out != nil {
		if err := enc.EncodeElement(out, xml.StartElement{Name: xml.Name{Local: req.Action + "Result"}}); err != nil {
			writeIAMError(w, reqID, &apiError{status: http.StatusInternalServerError, code: "ServiceFailure", msg: err.Error()})
			return
		}
	}
	_ = enc.EncodeElement(xResponseMetadata{RequestID: reqID}, xml.StartElement{Name: xml.Name{Local: "ResponseMetadata"}})
	_ = enc.EncodeToken(start.End())
	_ = enc.Flush()
	w.Header().Set("Content-Type", "text/xml")
	_, _ = io.WriteString(w, b.String())
}

type xResponseMetadata struct {
	RequestID string `xml:"RequestId"`
}

// xIAMError is IAM's (awsquery) error body.
type xIAMError struct {
	XMLName   xml.Name `xml:"ErrorResponse"`
	Xmlns     string   `xml:"xmlns,attr"`
	Type      string   `xml:"Error>Type"`
	Code      string   `xml:"Error>Code"`
	Message   string   `xml:"Error>Message"`
	RequestID string   `xml:"RequestId"`
}

func writeIAMError(w http.ResponseWriter, reqID string, e *apiError) {
	typ := "Sender"
	if e.status >= 500 {
		typ = "Receiver"
	}
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(e.status)
	b, _ := xml.Marshal(xIAMError{Xmlns: iamNS, Type: typ, Code: e.code, Message: e.msg, RequestID: reqID})
	_, _ = io.WriteString(w, xml.Header)
	_, _ = w.Write(b)
}

func iamError(status int, code, format string, args ...any) *apiError {
	return &apiError{status: status, code: code, msg: fmt.Sprintf(format, args...)}
}

func noSuchProfile(name string) *apiError {
	return iamError(http.StatusNotFound, "NoSuchEntity", "Instance Profile %s cannot be found.", name)
}

func noSuchRole(name string) *apiError {
	return iamError(http.StatusNotFound, "NoSuchEntity", "The role with name %s cannot be found.", name)
}

// validName checks an IAM name parameter as IAM's input validation does.
func validName(param, v string) *apiError {
	if !iamNameRE.MatchString(v) {
		return iamError(http.StatusBadRequest, "ValidationError", "1 validation error detected: Value '%s' at '%s' failed to satisfy "+
			"constraint: Member must satisfy regular expression pattern: [\\w+=,.@-]+ and have length between 1 and 128", v, param)
	}
	return nil
}

type xRole struct {
	Path       string `xml:"Path"`
	RoleName   string `xml:"RoleName"`
	RoleID     string `xml:"RoleId"`
	Arn        string `xml:"Arn"`
	CreateDate string `xml:"CreateDate"`
	TrustDoc   string `xml:"AssumeRolePolicyDocument"`
}

type xIAMTag struct {
	Key   string `xml:"Key"`
	Value string `xml:"Value"`
}

type xInstanceProfile struct {
	ID         string    `xml:"InstanceProfileId"`
	Roles      []xRole   `xml:"Roles>member"`
	Name       string    `xml:"InstanceProfileName"`
	Path       string    `xml:"Path"`
	Arn        string    `xml:"Arn"`
	CreateDate string    `xml:"CreateDate"`
	Tags       []xIAMTag `xml:"Tags>member,omitempty"`
}

func (s *Sim) iamARN(kind, pathAndName string) string {
	return "arn:aws:iam::" + ownerID + ":" + kind + pathAndName
}

// profileARN is the ARN of a profile at path named name.
func (s *Sim) profileARN(path, name string) string { return s.iamARN("instance-profile", path+name) }

func (s *Sim) roleARN(name string) string { return s.iamARN("role", "/"+name) }

func (s *Sim) hasRole(name string) bool {
	return len(s.cfg.IAM.Roles) == 0 || slices.Contains(s.cfg.IAM.Roles, name)
}

func (s *Sim) xRole(name string) xRole {
	trust := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}`
	return xRole{Path: "/", RoleName: name, RoleID: iamID("AROA", name), Arn: s.roleARN(name),
		CreateDate: "2026-01-01T00:00:00Z", TrustDoc: url.QueryEscape(trust)}
}

// iamID is an IAM unique ID: prefix and 17 characters derived from seed.
func iamID(prefix, seed string) string {
	sum := sha256.Sum256([]byte(seed))
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	b := make([]byte, 17)
	for i := range b {
		b[i] = alphabet[int(sum[i])%len(alphabet)]
	}
	return prefix + string(b)
}

func (s *Sim) xProfile(p *profile) xInstanceProfile {
	x := xInstanceProfile{ID: p.ID, Name: p.Name, Path: p.Path, Arn: s.profileARN(p.Path, p.Name),
		CreateDate: p.Created.UTC().Format(time.RFC3339), Roles: []xRole{}}
	if p.Role != "" {
		x.Roles = append(x.Roles, s.xRole(p.Role))
	}
	for _, k := range slices.Sorted(maps.Keys(p.Tags)) {
		x.Tags = append(x.Tags, xIAMTag{Key: k, Value: p.Tags[k]})
	}
	return x
}

// profileFor returns the named profile or NoSuchEntity.
func (s *Sim) profileFor(r Request) (*profile, *apiError) {
	name := r.Get("InstanceProfileName")
	if aerr := validName("instanceProfileName", name); aerr != nil {
		return nil, aerr
	}
	p, ok := s.profiles[name]
	if !ok {
		return nil, noSuchProfile(name)
	}
	return p, nil
}

type profileResult struct {
	Profile xInstanceProfile `xml:"InstanceProfile"`
}

func (s *Sim) getInstanceProfile(r Request) (any, *apiError) {
	p, aerr := s.profileFor(r)
	if aerr != nil {
		return nil, aerr
	}
	return profileResult{s.xProfile(p)}, nil
}

// iamTags reads Tags.member.N.Key/Value, refusing more than IAM's limit.
func iamTags(r Request) (map[string]string, *apiError) {
	tags := r.Tags("Tags.member")
	if len(tags) > maxProfileTags {
		return nil, iamError(http.StatusConflict, "LimitExceeded", "Cannot exceed quota for TagsPerInstanceProfile: %d", maxProfileTags)
	}
	return tags, nil
}

func (s *Sim) createInstanceProfile(r Request) (any, *apiError) {
	name, path := r.Get("InstanceProfileName"), r.Get("Path")
	if path == "" {
		path = "/"
	}
	if aerr := validName("instanceProfileName", name); aerr != nil {
		return nil, aerr
	}
	if len(path) > 512 || !iamPathRE.MatchString(path) {
		return nil, iamError(http.StatusBadRequest, "ValidationError", "1 validation error detected: Value '%s' at 'path' failed to "+
			"satisfy constraint: Member must satisfy regular expression pattern: (\\u002F)|(\\u002F[\\u0021-\\u007E]+\\u002F)", path)
	}
	if _, ok := s.profiles[name]; ok {
		return nil, iamError(http.StatusConflict, "EntityAlreadyExists", "Instance Profile %s already exists.", name)
	}
	tags, aerr := iamTags(r)
	if aerr != nil {
		return nil, aerr
	}
	now := s.now()
	p := &profile{InstanceProfile: InstanceProfile{Name: name, Path: path, Tags: tags}, ID: iamID("AIPA", name+s.nextID("p")), Created: now,
		Visible: now.Add(s.cfg.IAM.PropagationDelay.Duration)}
	s.profiles[name] = p
	return profileResult{s.xProfile(p)}, nil
}

func (s *Sim) tagInstanceProfile(r Request) (any, *apiError) {
	p, aerr := s.profileFor(r)
	if aerr != nil {
		return nil, aerr
	}
	tags, aerr := iamTags(r)
	if aerr != nil {
		return nil, aerr
	}
	merged := maps.Clone(p.Tags)
	if merged == nil {
		merged = map[string]string{}
	}
	maps.Copy(merged, tags)
	if len(merged) > maxProfileTags {
		return nil, iamError(http.StatusConflict, "LimitExceeded", "Cannot exceed quota for TagsPerInstanceProfile: %d", maxProfileTags)
	}
	p.Tags = merged
	return nil, nil
}

// roleParam is the RoleName parameter, validated and known to the account.
func (s *Sim) roleParam(r Request) (string, *apiError) {
	role := r.Get("RoleName")
	if aerr := validName("roleName", role); aerr != nil {
		return "", aerr
	}
	if !s.hasRole(role) {
		return "", noSuchRole(role)
	}
	return role, nil
}

// profileAndRole are the InstanceProfileName and RoleName parameters,
// validated and known to the account.
func (s *Sim) profileAndRole(r Request) (*profile, string, *apiError) {
	p, aerr := s.profileFor(r)
	if aerr != nil {
		return nil, "", aerr
	}
	role, aerr := s.roleParam(r)
	return p, role, aerr
}

func (s *Sim) addRoleToInstanceProfile(r Request) (any, *apiError) {
	p, role, aerr := s.profileAndRole(r)
	if aerr != nil {
		return nil, aerr
	}
	if p.Role != "" {
		return nil, iamError(http.StatusConflict, "LimitExceeded", "Cannot exceed quota for InstanceSessionsPerInstanceProfile: 1")
	}
	p.Role = role
	return nil, nil
}

func (s *Sim) removeRoleFromInstanceProfile(r Request) (any, *apiError) {
	p, role, aerr := s.profileAndRole(r)
	if aerr != nil {
		return nil, aerr
	}
	if p.Role != role {
		return nil, noSuchRole(role)
	}
	p.Role = ""
	return nil, nil
}

func (s *Sim) deleteInstanceProfile(r Request) (any, *apiError) {
	p, aerr := s.profileFor(r)
	if aerr != nil {
		return nil, aerr
	}
	if p.Role != "" {
		return nil, iamError(http.StatusConflict, "DeleteConflict", "Cannot delete entity, must remove roles from instance profile first.")
	}
	delete(s.profiles, p.Name)
	return nil, nil
}

type listProfilesResult struct {
	Profiles    []xInstanceProfile `xml:"InstanceProfiles>member"`
	IsTruncated bool               `xml:"IsTruncated"`
	Marker      string             `xml:"Marker,omitempty"`
}

// listInstanceProfiles lists the profiles under PathPrefix in name order,
// MaxItems (default 100) a page, continued by Marker.
func (s *Sim) listInstanceProfiles(r Request) (any, *apiError) {
	prefix := r.Get("PathPrefix")
	if prefix == "" {
		prefix = "/"
	}
	limit := r.Int("MaxItems", 100)
	if limit < 1 || limit > maxListItems {
		return nil, iamError(http.StatusBadRequest, "ValidationError", "1 validation error detected: Value '%d' at 'maxItems' "+
			"failed to satisfy constraint: Member must have value between 1 and %d", limit, maxListItems)
	}
	var names []string
	for _, name := range slices.Sorted(maps.Keys(s.profiles)) {
		if strings.HasPrefix(s.profiles[name].Path, prefix) && name > r.Get("Marker") {
			names = append(names, name)
		}
	}
	out := listProfilesResult{Profiles: []xInstanceProfile{}}
	for i, name := range names {
		if i == limit {
			out.IsTruncated, out.Marker = true, names[i-1]
			break
		}
		out.Profiles = append(out.Profiles, s.xProfile(s.profiles[name]))
	}
	return out, nil
}

type roleResult struct {
	Role xRole `xml:"Role"`
}

func (s *Sim) getRole(r Request) (any, *apiError) {
	role, aerr := s.roleParam(r)
	if aerr != nil {
		return nil, aerr
	}
	return roleResult{s.xRole(role)}, nil
}

// InstanceProfiles returns the account's instance profiles by name.
func (s *Sim) InstanceProfiles() map[string]InstanceProfile {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]InstanceProfile, len(s.profiles))
	for name, p := range s.profiles {
		c := p.InstanceProfile
		c.Tags = maps.Clone(p.Tags)
		out[name] = c
	}
	return out
}

// iamConfigProfiles builds the profiles of the config.
func iamConfigProfiles(cfg IAM, now time.Time) map[string]*profile {
	out := map[string]*profile{}
	for _, p := range cfg.InstanceProfiles {
		c := p
		if c.Path == "" {
			c.Path = "/"
		}
		c.Tags = maps.Clone(p.Tags)
		out[p.Name] = &profile{InstanceProfile: c, ID: iamID("AIPA", p.Name), Created: now}
	}
	return out
}

// profileCheck is the fleet error EC2 gives a launch whose template names
// an instance profile EC2 does not know: none of that name, or one created
// less than IAM.PropagationDelay ago ("" when there is none or EC2 knows
// it). Karpenter reads the message (IsInstanceProfileNotFound).
func (s *Sim) profileCheck(lt *launchTemplate) (code, msg string) {
	value, param := lt.Data.Get("IamInstanceProfile.Name"), "iamInstanceProfile.name"
	name := value
	if value == "" {
		value, param = lt.Data.Get("IamInstanceProfile.Arn"), "iamInstanceProfile.arn"
		name = value[strings.LastIndexByte(value, '/')+1:]
	}
	if value == "" {
		return "", ""
	}
	if p := s.profiles[name]; p != nil && !s.now().Before(p.Visible) {
		return "", ""
	}
	return "InvalidParameterValue", fmt.Sprintf("Value (%s) for parameter %s is invalid. Invalid IAM Instance Profile name", value, param)
}
