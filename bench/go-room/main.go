// go-room: an independent WebSocket room server for bench/load.sh, so the generators are
// also compared against a server that is not wirebench's own. The same protocol as
// `wirebench room`: ws://HOST:PORT/rooms/NAME; a message goes unchanged to every other
// member of the room, except one whose top-level JSON object has "req": true, which goes
// back to its sender only. One reader and one writer goroutine per member (gorilla's
// documented pattern), a bounded queue per member: a member that falls 1,024 messages
// behind is closed. Not for real networks: no limits beyond that.
package main

import (
	"encoding/json"
	"flag"
	"log"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
)

type member struct {
	conn *websocket.Conn
	out  chan msg
}

type msg struct {
	kind int
	data []byte
}

type hub struct {
	mu    sync.Mutex
	rooms map[string]map[*member]struct{}
}

var (
	received, sent, dropped atomic.Uint64
	upgrader                = websocket.Upgrader{ReadBufferSize: 4096, WriteBufferSize: 4096, CheckOrigin: func(*http.Request) bool { return true }}
)

func (h *hub) join(room string, m *member) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.rooms[room]
	if r == nil {
		r = map[*member]struct{}{}
		h.rooms[room] = r
	}
	r[m] = struct{}{}
}

func (h *hub) leave(room string, m *member) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r := h.rooms[room]; r != nil {
		delete(r, m)
		if len(r) == 0 {
			delete(h.rooms, room)
		}
	}
}

// to queues a message for one member, never blocking the sender.
func to(m *member, x msg) {
	select {
	case m.out <- x:
	default:
		dropped.Add(1)
	}
}

func isRequest(b []byte) bool {
	var v struct {
		Req bool `json:"req"`
	}
	return json.Unmarshal(b, &v) == nil && v.Req
}

func (h *hub) relay(room string, from *member, x msg) {
	if isRequest(x.data) {
		to(from, x)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for m := range h.rooms[room] {
		if m != from {
			to(m, x)
		}
	}
}

func writer(m *member) {
	defer m.conn.Close()
	for x := range m.out {
		m.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if err := m.conn.WriteMessage(x.kind, x.data); err != nil {
			return
		}
		sent.Add(1)
	}
	m.conn.SetWriteDeadline(time.Now().Add(2 * time.Second))
	m.conn.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
}

func (h *hub) serve(w http.ResponseWriter, r *http.Request) {
	conn, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	conn.SetReadLimit(1 << 20)
	m := &member{conn: conn, out: make(chan msg, 1024)}
	room := r.URL.Path
	h.join(room, m)
	go writer(m)
	for {
		kind, data, err := conn.ReadMessage()
		if err != nil {
			break
		}
		received.Add(1)
		h.relay(room, m, msg{kind, data})
	}
	h.leave(room, m)
	close(m.out)
}

func main() {
	listen := flag.String("listen", "127.0.0.1:18182", "address to listen on")
	flag.Parse()
	h := &hub{rooms: map[string]map[*member]struct{}{}}
	http.HandleFunc("/rooms/", h.serve)
	srv := &http.Server{Addr: *listen}
	go func() {
		if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
			log.Fatal(err)
		}
	}()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	events := received.Load() + sent.Load()
	us := 0.0
	if events > 0 {
		us = float64(cpu.Microseconds()) / float64(events)
	}
	log.Printf("go-room: received %d, sent %d, dropped %d, cpu %.2fs, %.2f us per message event",
		received.Load(), sent.Load(), dropped.Load(), cpu.Seconds(), us)
}
