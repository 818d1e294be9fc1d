package api

import "github.com/hutchsandbox/hutch/client"

// The API's wire types live in the public package client, so that a Go
// program outside this module can name what it sends and receives; the
// handlers use them through these aliases, and so encode and decode the
// very same structs.
type (
	Conversation        = client.Conversation
	ConversationRequest = client.ConversationRequest
	Health              = client.Health
	Version             = client.Version
	OfficeEntry         = client.OfficeEntry
	ExecRequest         = client.ExecRequest
	Frame               = client.Frame
	ExecResult          = client.ExecResult
	ErrorBody           = client.ErrorBody
	LimitsRequest       = client.LimitsRequest
	Status              = client.Status
	DoorRequest         = client.DoorRequest
	PolicyAnswer        = client.PolicyAnswer
	Mount               = client.Mount
	VaultRequest        = client.VaultRequest
	VaultEntry          = client.VaultEntry
	VaultPlaceholder    = client.VaultPlaceholder
	VaultSummary        = client.VaultSummary
	ChatRequest         = client.ChatRequest
	ChatReply           = client.ChatReply
	AdminLinkRequest    = client.AdminLinkRequest
	AdminLinkResponse   = client.AdminLinkResponse
	FileRequest         = client.FileRequest
	WriteAnswer         = client.WriteAnswer
)

// TrailerError carries, after a file's bytes, the error that cut a
// /v1/files/read short (an ErrorBody as JSON); a read that ended whole
// has none.
const TrailerError = client.TrailerError
