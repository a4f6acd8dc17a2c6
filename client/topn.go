package client

// The top-N models' fold-in rules (indicator, implicit, ease-lowrank) are
// registered by package topn: a device that ranks with a published top-N
// model (dp-ease, dp-popularity) needs them linked in.
import _ "github.com/privrec/privrec/topn"
