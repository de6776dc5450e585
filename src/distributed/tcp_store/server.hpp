#pragma once
// StoreServer: the map behind a TcpStore, served over TCP by one background thread (an Asio event
// loop). Everything but construction, shared() and destruction runs on that thread.

#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/steady_timer.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "distributed/tcp_store/protocol.hpp"

namespace dpipe::detail::store {

class StoreServer {
 public:
  /// Binds `host`:`port` (0: any free port) and starts serving. Throws RendezvousError when it
  /// cannot bind.
  StoreServer(const std::string& host, std::uint16_t port, std::string token, std::size_t max_message_bytes);
  /// Lingers while a rank still connected has yet to collect a round another rank collected (up
  /// to the rounds' timeout), sends the replies already decided, tells every client the store
  /// closes, closes every connection and joins the thread.
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  /// The server of this process on `host`:`port`, started if none runs, so that the TcpStores of
  /// one process (a trainer's loaders) share one. Port 0 always starts a new one. Throws
  /// RendezvousError when the port is served here for another job token. Thread-safe.
  static std::shared_ptr<StoreServer> shared(const std::string& host, std::uint16_t port, const std::string& token,
                                             std::size_t max_message_bytes);

  [[nodiscard]] std::uint16_t port() const noexcept { return port_; }

 private:
  class Connection;
  friend class Connection;

  /// A get() or wait() for keys that do not all exist yet.
  struct Waiter {
    std::weak_ptr<Connection> connection;
    std::vector<std::string> keys;
    bool wants_value = false;  // get(): reply with the value of keys[0]
  };

  /// A connection waiting to collect a round, and its rank.
  struct Collector {
    std::weak_ptr<Connection> connection;
    std::uint64_t rank = 0;
  };

  /// A connection waiting to hear that another rank of `member` is gone without leaving.
  struct Watcher {
    std::weak_ptr<Connection> connection;
    std::string member;
    std::uint64_t rank = 0;
  };

  /// Why a rank left the job, and when (the first departure is the cause of the others).
  struct Departure {
    std::string why;
    std::uint64_t order = 0;
    bool on_purpose = false;  // it shut its loader down
  };

  /// A round of Store::exchange that not every rank collected yet.
  struct Round {
    std::vector<std::optional<std::vector<std::byte>>> values;  // by rank
    std::vector<bool> collected;                                // by rank
    std::vector<Collector> waiting;                             // who waits to collect the values
    std::size_t arrived = 0;
    std::size_t collections = 0;
    std::uint64_t timeout_ms = 0;
    std::unique_ptr<asio::steady_timer> deadline;  // until every rank arrived
    std::unique_ptr<asio::steady_timer> stall;     // the next word to the waiting ranks on who is missing
    [[nodiscard]] bool complete() const noexcept { return arrived == values.size(); }
  };

  void accept();
  /// Serves one request of `connection`; replies now or when its keys exist.
  void serve(const std::shared_ptr<Connection>& connection, Request request);
  void exchange(const std::shared_ptr<Connection>& connection, Request request);
  /// The round `name` of `world_size` ranks, opened (with its deadline and stall warnings) when
  /// new; null, with `error` set, when the round says the world has another size.
  Round* open_round(const std::string& name, const Request& request, std::string& error);
  /// Every `interval` while round `name` is incomplete: tells the ranks waiting in it who is missing.
  void warn_when_stalled(const std::string& name, std::chrono::milliseconds interval,
                         std::chrono::steady_clock::time_point opened);
  /// Records `rank`'s value in round `name`; answers the ranks waiting for it when it completes.
  /// Returns an error for a rank that arrives twice or disagrees on the world size.
  std::optional<std::string> arrive(const std::string& name, Request& request);
  /// Answers `connection` with round `name`'s values once every rank arrived.
  void collect(const std::shared_ptr<Connection>& connection, const std::string& name, const Request& request);
  /// Sends a complete round's values to `collectors`, forgetting the round once every rank has them.
  void deliver(std::map<std::string, Round>::iterator round, const std::vector<Collector>& collectors);
  /// Whether a rank still connected has yet to collect a round that another rank collected: the
  /// answer it will ask for must outlive this process's loaders.
  [[nodiscard]] bool owes_answers() const;
  /// While lingering: stops once nothing is owed.
  void stop_when_settled();
  /// Tells every client that the store closes, and closes.
  void close_all();
  /// What a client of `member` hears when the store closes: `closing` (ask the next server), or,
  /// when another rank of its loader left, that this rank is gone (no server will answer).
  [[nodiscard]] Reply closing_reply(const std::optional<Member>& member, const Reply& closing) const;
  /// Replies to the waiters whose keys all exist now.
  void settle_waiters();
  [[nodiscard]] bool has_all(const std::vector<std::string>& keys) const;
  /// `member` left the job (`why`; `on_purpose`: it shut its loader down): its rounds still
  /// missing it fail, and (unless on purpose) the watchers of its other ranks hear of it.
  void depart(const Member& member, const std::string& why, bool on_purpose);
  /// The earliest departure of a rank of `member`'s loader other than `member`'s, as a client of
  /// it hears it: "rank 1 is gone: ...".
  [[nodiscard]] std::optional<std::string> first_departure(const std::string& member, std::uint64_t except,
                                                           bool including_on_purpose) const;
  /// Why `member` may not join its loader: it disagrees with the rank that came first on the
  /// world size or the fingerprint, or its rank is connected already (another job on this port).
  [[nodiscard]] std::optional<std::string> misfit(const Member& member) const;
  /// A connection refused for `reason` claimed to be `member`: when it looks like a rank of this
  /// job (it agrees with the loader's ranks, and its rank is not connected), the loader's rounds
  /// and watchers hear of it as gone, instead of waiting for it to the timeout.
  void refused(const Member& member, const std::string& reason);
  /// Decides the refusals of `loader`'s ranks kept until its rank 0 greeted.
  void settle_refusals(const std::string& loader);
  /// Whether `member` may connect: rank 0, or a rank of a loader whose rank 0 greeted this server
  /// (or any, while no rank 0 did). A rank of rank 0's next loader, which will serve its own
  /// store once its previous loader (and this server) is gone, waits for that store instead.
  [[nodiscard]] bool admits(const Member& member) const;
  /// Why `round` cannot complete, if one of its missing ranks is gone.
  [[nodiscard]] std::optional<std::string> departed_from(const std::string& round, const Round& state) const;
  /// Fails `round` for everyone waiting in it and for the ranks still to come.
  void fail_round(const std::string& round, Failure failure, const std::string& error);
  /// While stopping: lets the event loop end once every connection is closed.
  void stop_when_closed();

  asio::io_context io_;
  asio::ip::tcp::acceptor acceptor_;
  asio::steady_timer cutoff_;        // while lingering or stopping: how long the peers get
  asio::steady_timer retry_accept_;  // after a failed accept
  std::uint16_t port_ = 0;
  std::string token_;
  std::size_t max_message_bytes_;
  std::map<std::string, std::vector<std::byte>> values_;
  std::vector<Waiter> waiters_;
  std::map<std::string, Round> rounds_;
  std::map<Member, Departure> departed_;
  std::uint64_t departures_ = 0;
  std::vector<Watcher> watchers_;
  /// Per loader (a member's name), the first rank that greeted: the world size and fingerprint
  /// the others must agree on.
  std::map<std::string, Member> loaders_;
  std::vector<std::pair<Member, std::string>> refusals_;  // refused before their rank 0 greeted
  /// The members whose rank 0 greeted this server and did not leave: the live loaders of the
  /// process serving it.
  std::set<std::string> hosted_;
  std::map<std::string, Reply> failed_rounds_;  // the last ones, for the ranks that arrive after the failure
  std::deque<std::string> failed_order_;
  std::vector<std::weak_ptr<Connection>> connections_;
  bool lingering_ = false;  // shutting down: owes answers still, serves only the clients it has
  bool stopping_ = false;   // closing the connections
  std::thread thread_;
};

}  // namespace dpipe::detail::store
