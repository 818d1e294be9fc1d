package api

import (
	"net/http"

	"github.com/hutchsandbox/hutch/internal/chat"
	"github.com/hutchsandbox/hutch/internal/metrics"
)

func (s *Server) chat(w http.ResponseWriter, r *http.Request) error {
	var req ChatRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	addr, err := addressOf(r.Context(), req.Conversation)
	if err != nil {
		return err
	}
	if err := s.recordKind(addr, req.Conversation); err != nil {
		return err
	}
	reply, err := chat.Handle(chatActor(r, req.Conversation.User), s.Service, s.Mode, addr, req.Message)
	if err != nil {
		return err
	}
	if reply.Refusal != "" {
		s.Service.CountRefused(chatActor(r, req.Conversation.User), metrics.SurfaceChat, reply.Refusal)
	}
	writeJSON(w, http.StatusOK, ChatReply{Text: reply.Text})
	return nil
}
