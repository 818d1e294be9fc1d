package api

import (
	"net/http"

	"github.com/hutchsandbox/hutch/internal/chat"
	"github.com/hutchsandbox/hutch/internal/metrics"
)

// ChatRequest is /v1/chat's body: a chat message such as "/sandbox boost"
// that a bot received in a conversation.
type ChatRequest struct {
	Conversation Conversation `json:"conversation"`
	Message      string       `json:"message"`
}

// ChatReply is the text the bot should post back.
type ChatReply struct {
	Text string `json:"text"`
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) error {
	var req ChatRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	addr, err := req.Conversation.address()
	if err != nil {
		return err
	}
	if err := s.recordKind(addr, req.Conversation); err != nil {
		return err
	}
	reply, err := chat.Handle(r.Context(), s.Service, s.Mode, addr, req.Message)
	if err != nil {
		return err
	}
	if reply.Refusal != "" {
		s.Service.CountRefused(metrics.SurfaceChat, reply.Refusal)
	}
	writeJSON(w, http.StatusOK, ChatReply{Text: reply.Text})
	return nil
}
