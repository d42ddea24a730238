package v1

// Karpenter's metadataOptions defaults (CRD defaults).
const (
	DefaultHTTPEndpoint            = "enabled"
	DefaultHTTPProtocolIPv6        = "disabled"
	DefaultHTTPPutResponseHopLimit = int64(1)
	DefaultHTTPTokens              = "required"
)

// SetDefaults fills what Karpenter's CRD defaults: metadataOptions
// {httpEndpoint: enabled, httpProtocolIPv6: disabled,
// httpPutResponseHopLimit: 1, httpTokens: required} (each unset field of a
// partial block too), and amiFamily from the alias term when unset.
func (in *EC2NodeClass) SetDefaults() {
	s := &in.Spec
	if s.MetadataOptions == nil {
		s.MetadataOptions = &MetadataOptions{}
	}
	m := s.MetadataOptions
	if m.HTTPEndpoint == nil {
		m.HTTPEndpoint = ptr(DefaultHTTPEndpoint)
	}
	if m.HTTPProtocolIPv6 == nil {
		m.HTTPProtocolIPv6 = ptr(DefaultHTTPProtocolIPv6)
	}
	if m.HTTPPutResponseHopLimit == nil {
		m.HTTPPutResponseHopLimit = ptr(DefaultHTTPPutResponseHopLimit)
	}
	if m.HTTPTokens == nil {
		m.HTTPTokens = ptr(DefaultHTTPTokens)
	}
	if s.AMIFamily == nil {
		if f, _, ok := in.Alias(); ok {
			if fam, ok := AliasFamilies[f]; ok {
				s.AMIFamily = ptr(fam)
			}
		}
	}
}

func ptr[T any](v T) *T { return &v }
