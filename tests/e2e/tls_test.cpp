// TLS on the host API (docs/security.md): a host given --tls-cert and
// --tls-key serves HTTPS, and with --tls-ca asks its clients for a
// certificate that CA signed (mutual TLS). Schedulers and the CLI trust only
// hosts their CA signed. Certificates made here with the openssl command.

#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include "core/util/text.h"
#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // httplib's TLS client writes with OpenSSL (no MSG_NOSIGNAL): a refused
    // handshake must fail the call, not kill the test with SIGPIPE.
    signal(SIGPIPE, SIG_IGN);
    // A CA, a host certificate for 127.0.0.1, a client certificate, and a
    // second CA that signed none of them.
    std::string script = R"(set -e
cd ")" + certs_.path() + R"("
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:prime256v1 -out "$1" 2>/dev/null; }
key ca.key; key other-ca.key; key host.key; key client.key
openssl req -x509 -new -key ca.key -out ca.pem -days 2 -subj /CN=pgfleet-test-ca
openssl req -x509 -new -key other-ca.key -out other-ca.pem -days 2 -subj /CN=someone-else
openssl req -new -key host.key -out host.csr -subj /CN=127.0.0.1
printf 'subjectAltName=IP:127.0.0.1\n' > host.ext
openssl x509 -req -in host.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out host.pem -days 2 -extfile host.ext 2>/dev/null
openssl req -new -key client.key -out client.csr -subj /CN=pgfleet-scheduler
openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem -days 2 2>/dev/null
echo not a certificate > junk.pem
)";
    auto made = testing::Run({"/bin/sh", "-c", script});
    ASSERT_EQ(0, made.exit_code) << made.err;
    cluster_ = std::make_unique<Cluster>(db_);
  }
  void TearDown() override {
    if (HasFailure()) std::cerr << cluster_->Logs();
  }
  std::string Cert(const std::string& name) { return certs_.path() + "/" + name; }
  std::vector<std::string> ServerFlags() {
    return {"--tls-cert",     Cert("host.pem"), "--tls-key",
            Cert("host.key"), "--tls-ca",       Cert("ca.pem")};
  }
  // The CLI, trusting `ca` and presenting the client certificate.
  CommandResult Cli(std::vector<std::string> args, const std::string& ca) {
    args.insert(args.begin(), BinaryPath("pgfleet"));
    return testing::Run(
        args, {"PGFLEET_DB=" + db_.dsn(), "PGFLEET_TOKEN_FILE=", "PGFLEET_TLS_CA=" + ca,
               "PGFLEET_TLS_CERT=" + Cert("client.pem"), "PGFLEET_TLS_KEY=" + Cert("client.key")});
  }

  TestDatabase db_;
  TempDir certs_;
  std::unique_ptr<Cluster> cluster_;
};

TEST_F(TlsTest, JobsAreDispatchedAndTheirLogsReadOverMutualTls) {
  cluster_->StartScheduler("s1", {"--tls-ca", Cert("ca.pem"), "--tls-cert", Cert("client.pem"),
                                  "--tls-key", Cert("client.key")});
  cluster_->StartHost("h1", 4000, 4000, ServerFlags());
  ASSERT_TRUE(cluster_->WaitHostsUp(1));
  std::string url = db_.Scalar("select api_url from pgfleet.hosts where id = 'h1'");
  ASSERT_EQ(0u, url.find("https://127.0.0.1:")) << url;

  // Dispatch (scheduler to host) and the output stream (CLI to host) over TLS.
  auto run = Cli({"run", "--wait", "--", "sh", "-c", "echo over-tls"}, Cert("ca.pem"));
  ASSERT_EQ(0, run.exit_code) << run.err;
  EXPECT_NE(std::string::npos, run.out.find("over-tls")) << run.out;
  std::string id = db_.Scalar("select max(id) from pgfleet.jobs");
  auto logs = Cli({"logs", id}, Cert("ca.pem"));
  EXPECT_EQ(0, logs.exit_code) << logs.err;
  EXPECT_EQ("over-tls\n", logs.out);
  EXPECT_EQ(std::string::npos, logs.err.find("kept in the database")) << logs.err;

  // A CLI that trusts another CA does not talk to the host: it says so and
  // shows the database's copy.
  auto distrust = Cli({"logs", id}, Cert("other-ca.pem"));
  EXPECT_NE(std::string::npos, distrust.err.find("not reachable")) << distrust.err;

  // Plain HTTP to the TLS port, and TLS without a client certificate, get nothing.
  std::string port = url.substr(url.rfind(':') + 1);
  httplib::Client plain("http://127.0.0.1:" + port);
  plain.set_connection_timeout(3, 0);
  plain.set_read_timeout(3, 0);
  auto p = plain.Get("/health");
  EXPECT_FALSE(p && p->status == 200);
  httplib::Client anonymous("https://127.0.0.1:" + port);
  anonymous.set_ca_cert_path(Cert("ca.pem").c_str());
  anonymous.enable_server_certificate_verification(true);
  auto a = anonymous.Get("/health");
  EXPECT_FALSE(a && a->status == 200);
  httplib::Client member("https://127.0.0.1:" + port, Cert("client.pem"), Cert("client.key"));
  member.set_ca_cert_path(Cert("ca.pem").c_str());
  member.enable_server_certificate_verification(true);
  auto m = member.Get("/health");
  ASSERT_TRUE(m);
  EXPECT_EQ(200, m->status);
  EXPECT_EQ(0, db_.AttemptsWithRepeated("running"));
}

TEST_F(TlsTest, ASchedulerThatDoesNotTrustTheHostSendsItNothing) {
  cluster_->StartScheduler("s1", {"--tls-ca", Cert("other-ca.pem"), "--tls-cert",
                                  Cert("client.pem"), "--tls-key", Cert("client.key")});
  cluster_->StartHost("h1", 4000, 4000, ServerFlags());
  ASSERT_TRUE(cluster_->WaitHostsUp(1));
  std::string id = util::Trim(Cli({"run", "--", "true"}, Cert("ca.pem")).out);
  ASSERT_FALSE(id.empty());
  // The dispatch fails the handshake: nothing reached the host, the job went
  // back to pending and the host was suspended (it never ran).
  ASSERT_TRUE(WaitFor(
      [&] {
        return db_.Count("select count(*) from pgfleet.job_events where job_id = " + id +
                         " and kind = 'requeued'") > 0;
      },
      20s));
  EXPECT_EQ(0, db_.Count("select count(*) from pgfleet.job_events where job_id = " + id +
                         " and kind = 'running'"));
  EXPECT_NE("succeeded", db_.Scalar("select state from pgfleet.jobs where id = " + id));
}

TEST_F(TlsTest, BadTlsFlagsAreRefusedNamingTheFlag) {
  struct Case {
    std::vector<std::string> flags;
    std::string words;
  };
  for (const Case& c : std::vector<Case>{
           {{"--tls-cert", Cert("host.pem")}, "--tls-cert and --tls-key go together"},
           {{"--tls-key", Cert("host.key")}, "--tls-cert and --tls-key go together"},
           {{"--tls-cert", Cert("nope.pem"), "--tls-key", Cert("host.key")},
            "--tls-cert " + Cert("nope.pem") + " cannot be read"},
           {{"--tls-ca", Cert("nope.pem")}, "--tls-ca " + Cert("nope.pem") + " cannot be read"},
           {{"--tls-cert", Cert("junk.pem"), "--tls-key", Cert("host.key")},
            "do not make a TLS server"},
           {{"--tls-cert", Cert("host.pem"), "--tls-key", Cert("client.key")},
            "do not make a TLS server"},
       }) {
    std::vector<std::string> argv = {BinaryPath("pgfleet-hostd"),
                                     "--db",
                                     db_.dsn(),
                                     "--id",
                                     "bad",
                                     "--token-file",
                                     cluster_->token_file(),
                                     "--data-dir",
                                     certs_.path() + "/bad"};
    argv.insert(argv.end(), c.flags.begin(), c.flags.end());
    auto r = testing::Run(argv, {}, 30s);
    EXPECT_EQ(2, r.exit_code) << r.err;
    EXPECT_NE(std::string::npos, r.err.find(c.words)) << "want: " << c.words << "\ngot: " << r.err;
  }
  EXPECT_EQ(0, db_.Count("select count(*) from pgfleet.hosts"));
  // The CLI's environment the same way.
  auto cli = testing::Run({BinaryPath("pgfleet"), "ps"},
                          {"PGFLEET_DB=" + db_.dsn(), "PGFLEET_TLS_CERT=" + Cert("client.pem")});
  EXPECT_EQ(2, cli.exit_code);
  EXPECT_NE(std::string::npos, cli.err.find("--tls-cert and --tls-key go together")) << cli.err;
}

}  // namespace
}  // namespace pgfleet::testing
