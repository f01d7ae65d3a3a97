// hpcserver DB [--port P] [--bind ADDR]: the JSON API (api.hpp) and the web viewer's
// static files over HTTP, read-only, with a random access token required on every
// request. Built a second time as hpcviewer (HPC_VIEWER): a free port, and the URL opened
// in a browser when a desktop is available.
#include <CLI/CLI.hpp>
#include <httplib.h>
#include <malloc.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "presentation/experiment.hpp"
#include "presentation/server/api.hpp"

using namespace hpc::present;
namespace fs = std::filesystem;

namespace {

hpc::Expected<std::string> random_token() {
  std::ifstream r("/dev/urandom", std::ios::binary);
  unsigned char b[16];
  if (!r.read(reinterpret_cast<char*>(b), sizeof b)) return hpc::Status::error("/dev/urandom: cannot read");
  std::string s;
  char hex[3];
  for (unsigned char c : b) std::snprintf(hex, sizeof hex, "%02x", c), s += hex;
  return s;
}

// Constant-time comparison, so the token cannot be guessed byte by byte from timings.
bool same(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char d = 0;
  for (size_t i = 0; i < a.size(); ++i) d |= static_cast<unsigned char>(a[i] ^ b[i]);
  return d == 0;
}

std::string token_of(const httplib::Request& req) {
  if (req.has_param("token")) return req.get_param_value("token");
  if (req.has_header("X-HPC-Token")) return req.get_header_value("X-HPC-Token");
  std::string cookie = req.get_header_value("Cookie");
  auto at = cookie.find("hpctoken=");
  if (at != std::string::npos) return cookie.substr(at + 9, 32);
  return "";
}

void send_error(httplib::Response& res, int status, const std::string& what) {
  std::string msg;
  for (char c : what) msg += (c == '"' || c == '\\') ? std::string("\\") + c : (static_cast<unsigned char>(c) < 0x20 ? std::string(" ") : std::string(1, c));
  res.status = status;
  res.set_content("{\"error\": \"" + msg + "\"}", "application/json");
}

const char* mime_of(const fs::path& p) {
  auto e = p.extension().string();
  if (e == ".html") return "text/html; charset=utf-8";
  if (e == ".js") return "text/javascript; charset=utf-8";
  if (e == ".css") return "text/css; charset=utf-8";
  if (e == ".svg") return "image/svg+xml";
  if (e == ".png") return "image/png";
  return "application/octet-stream";
}

}  // namespace

int main(int argc, char** argv) {
  // Memory stays bounded by the requests in flight: blocks of 256 KiB and more (reply
  // bodies, a trace screen's buffers) are mapped and unmapped on their own, never kept in
  // the heap (a fixed threshold also stops glibc raising it after each large free), and
  // few arenas, which Api::handle trims after each request.
  mallopt(M_MMAP_THRESHOLD, 256 << 10);
  mallopt(M_TRIM_THRESHOLD, 1 << 20);
  mallopt(M_ARENA_MAX, 2);
#ifdef HPC_VIEWER
  const char* tool = "hpcviewer";
  int port = 0;
#else
  const char* tool = "hpcserver";
  int port = 8080;
#endif
  CLI::App app{std::string(tool) + ": serve an HPCToolkit database to the web viewer (read-only)"};
  std::string dir, bind = "127.0.0.1", web = HPC_WEB_DIR;
  bool open = true;
  app.add_option("DB", dir, "database directory (hpcprof's output)")->required();
  app.add_option("-p,--port", port, "TCP port (0: any free port)")->check(CLI::Range(0, 65535));
  app.add_option("--bind", bind, "address to listen on (default 127.0.0.1: this machine only)");
  app.add_option("--web", web, "folder of the web viewer's static files");
  std::string baseline;
  app.add_option("--compare", baseline,
                 "a baseline database (another run): the views show its values beside DB's, matched by\n"
                 "name, and the change")
      ->option_text("BASE");
#ifdef HPC_VIEWER
  app.add_flag("!--no-open", open, "do not open a browser");
  // The reference's viewer is a Java program: its scripts pass a heap size (-jh 3G), which
  // means nothing to this one (no JVM; the database is mapped, not loaded).
  std::string javaHeap;
  app.add_option("--java-heap", javaHeap, "(-jh) accepted, without effect: the reference viewer's JVM heap size");
  std::vector<std::string> args(argv, argv + argc);
  for (std::string& a : args)
    if (a == "-jh") a = "--java-heap";
  std::vector<char*> argvOwn;
  for (std::string& a : args) argvOwn.push_back(a.data());
  argc = int(argvOwn.size());
  argv = argvOwn.data();
#else
  open = false;
#endif
  CLI11_PARSE(app, argc, argv);

  auto exp = Experiment::open(dir);
  if (!exp) {
    std::cerr << tool << ": " << exp.status().message() << "\n";
    return 1;
  }
  auto token = random_token();
  if (!token) {
    std::cerr << tool << ": " << token.status().message() << "\n";
    return 1;
  }
  const Experiment& e = **exp;
  std::unique_ptr<Experiment> base;
  if (!baseline.empty()) {
    auto b = Experiment::open(baseline);
    if (!b) {
      std::cerr << tool << ": " << b.status().message() << "\n";
      return 1;
    }
    base = std::move(*b);
  }
  Api api(e, base.get());
  std::error_code ec;
  const fs::path webRoot = fs::weakly_canonical(web, ec);

  httplib::Server srv;
  srv.set_payload_max_length(64 * 1024);  // the API is GET only; bodies are not read
  srv.set_read_timeout(10, 0);
  srv.set_write_timeout(30, 0);
  srv.set_keep_alive_max_count(100);
  const std::string tok = *token;
  srv.set_pre_routing_handler([&](const httplib::Request& req, httplib::Response& res) {
    if (!same(token_of(req), tok)) {
      send_error(res, 403, "missing or wrong access token (use the URL hpcserver printed)");
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  srv.Get(R"(/api/([a-z-]{1,32}))", [&](const httplib::Request& req, httplib::Response& res) {
    Params q;
    for (auto& [k, v] : req.params)
      if (k != "token") q[k] = v;
    Reply r;
    try {
      r = api.handle(req.matches[1], q);
    } catch (const std::exception& ex) {  // the boundary: no request takes the server down
      api.done();  // what the request touched leaves the process all the same
      return send_error(res, 500, std::string("internal error: ") + ex.what());
    }
    res.status = r.status;
    res.set_header("Cache-Control", "no-store");
    if (!r.stream) return res.set_content(std::move(r.body), r.contentType.c_str());
    // Written as computed (chunked): the provider runs once, after this handler returns.
    res.set_chunked_content_provider(r.contentType, [&api, stream = std::move(r.stream)](size_t, httplib::DataSink& sink) {
      bool ok = false;
      try {
        ok = stream([&](std::string_view s) { return sink.write(s.data(), s.size()); });
      } catch (const std::exception&) {  // the status is sent already: cut the reply short
      }
      api.done();
      if (ok) sink.done();
      return ok;
    });
  });
  srv.Get(R"(/(.*))", [&](const httplib::Request& req, httplib::Response& res) {
    std::string rel = req.matches[1];
    if (rel.empty()) rel = "index.html";
    std::error_code ec2;
    fs::path p = fs::weakly_canonical(webRoot / fs::path(rel).relative_path(), ec2);
    auto [r, _] = std::mismatch(webRoot.begin(), webRoot.end(), p.begin(), p.end());
    if (ec2 || r != webRoot.end()) return send_error(res, 403, "path outside the viewer's files");
    if (!fs::is_regular_file(p, ec2)) return send_error(res, 404, "no such file: " + rel.substr(0, 200));
    std::ifstream in(p, std::ios::binary);
    std::string body((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // The page keeps the token in a cookie, so its own requests carry it.
    res.set_header("Set-Cookie", "hpctoken=" + tok + "; Path=/; SameSite=Strict; HttpOnly");
    res.set_content(std::move(body), mime_of(p));
  });
  srv.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
    send_error(res, 500, "internal error");
  });

  if (port == 0) port = srv.bind_to_any_port(bind);
  else if (!srv.bind_to_port(bind, port)) port = -1;
  if (port <= 0) {
    std::cerr << tool << ": cannot listen on " << bind << ":" << port << "\n";
    return 1;
  }
  std::string host = bind == "0.0.0.0" ? "127.0.0.1" : bind;
  std::string url = "http://" + host + ":" + std::to_string(port) + "/?token=" + tok;
  std::cout << tool << ": serving " << e.dir().string() << (base ? " against " + base->dir().string() : std::string())
            << " at " << url << std::endl;
  if (open && std::getenv("DISPLAY") && std::system("command -v xdg-open >/dev/null 2>&1") == 0) {
    std::string cmd = "xdg-open '" + url + "' >/dev/null 2>&1 &";
    if (std::system(cmd.c_str()) != 0) std::cerr << tool << ": could not open a browser; use the URL above\n";
  }
  return srv.listen_after_bind() ? 0 : 1;
}
