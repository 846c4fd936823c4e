// Hot reload of the users file: each worker polls the file's identity
// (mtime, size, inode) on a cancelable timer and swaps in a new directory
// when it changed and parses; a bad file keeps the last good set of users and
// is reported once per change.
#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "ngx/conf/users_reload.h"

#include "core/config/users_file.h"
#include "core/log/log_escape.h"
#include "ngx/events/feed.h"
#include "ngx/main_conf.h"
#include "ngx/ngx_incl.h"
#include "ngx/worker.h"

namespace llmgw {
namespace {

bool file_sig(const std::string& path, FileSig& sig) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) return false;
    sig.mtime = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    sig.size = st.st_size;
    sig.ino = static_cast<std::int64_t>(st.st_ino);
    return true;
}

bool read_file(const std::string& path, std::string& out, std::string& err) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        err = "cannot be opened";
        return false;
    }
    std::ostringstream ss;
    ss << in.rdbuf();
    out = ss.str();
    return true;
}

// The warning for a loaded file that holds keys and that other users may
// read ("" when none; docs/directives.md#llm_gateway_users_file).
std::string exposure(const std::string& path, const Directory& dir) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) return "";
    return users_file_exposure(path, static_cast<unsigned>(st.st_mode), users_file_keys(dir));
}

// Keeps the worker's list of warnings (the admin overview's) in step with
// the file as last loaded.
void set_exposure(GatewayState& st, std::string w) {
    if (!st.users_file_warning.empty()) {
        auto& v = st.warnings;
        for (auto it = v.begin(); it != v.end(); ++it) {
            if (*it == st.users_file_warning) {
                v.erase(it);
                break;
            }
        }
    }
    st.users_file_warning = std::move(w);
    if (!st.users_file_warning.empty()) st.warnings.push_back(st.users_file_warning);
}

// Builds inline users + the file's users; "" or the reason it failed.
std::string build(const GatewayState& st, std::shared_ptr<Directory>& out) {
    std::string text, err;
    if (!read_file(st.users_file, text, err)) return err;
    auto dir = std::make_shared<Directory>(st.config.inline_directory());
    err = load_users_file(text, *dir);
    if (!err.empty()) return err;
    out = std::move(dir);
    return "";
}

void poll(ngx_event_t* ev) {
    auto* w = static_cast<Worker*>(ev->data);
    UsersPoll* p = w->users.get();
    GatewayState& st = *w->mcf->state;
    try {
        FileSig sig;
        if (!file_sig(st.users_file, sig)) sig = FileSig{};
        if (sig != p->current && !(p->have_rejected && sig == p->rejected)) {
            std::shared_ptr<Directory> dir;
            std::string err = sig.size < 0 ? std::string("cannot be read") : build(st, dir);
            if (!err.empty()) {
                p->rejected = sig;
                p->have_rejected = true;
                ngx_log_error(NGX_LOG_ERR, ev->log, 0,
                              "llm_gateway: users file \"%s\" %s; keeping the previous users",
                              log_value(st.users_file).c_str(), log_text(err).c_str());
            } else {
                // A reload that really happened: forget the rejection counts
                // of users that are gone.
                for (const UserConf& u : st.directory->users()) {
                    if (dir->find_user(u.name) == nullptr) {
                        shm_reset_metric(shm_store(w->mcf->zone), scope_prefix("user", u.name), "rej");
                        forget_rejections(w->mcf, "user", u.name);
                    }
                }
                st.directory = dir;
                p->current = sig;
                p->have_rejected = false;
                ngx_log_error(NGX_LOG_NOTICE, ev->log, 0, "llm_gateway: users file \"%s\" reloaded: %uz users",
                              log_value(st.users_file).c_str(), dir->users().size());
                set_exposure(st, exposure(st.users_file, *dir));
                if (!st.users_file_warning.empty()) {
                    ngx_log_error(NGX_LOG_WARN, ev->log, 0, "llm_gateway: %s", log_text(st.users_file_warning).c_str());
                }
            }
        }
    } catch (const std::exception& e) {
        ngx_log_error(NGX_LOG_ERR, ev->log, 0, "llm_gateway: users file reload failed: %s", log_text(e.what()).c_str());
    }
    if (!ngx_exiting) ngx_add_timer(ev, w->mcf->users_file_interval);
}

}  // namespace

// At configuration time: the file must load, or nginx -t fails.
std::string load_users_file_at_start(GatewayState& st) {
    std::shared_ptr<Directory> dir;
    std::string err = build(st, dir);
    if (err.empty()) {
        st.directory = dir;
        // Logged with the other warnings (collect_warnings), at every start,
        // reload and nginx -t.
        st.users_file_warning = exposure(st.users_file, *dir);
    }
    return err;
}

ngx_int_t init_users_file(ngx_cycle_t* cycle, Worker& w) {
    if (w.mcf->state->users_file.empty()) return NGX_OK;
    w.users = std::make_unique<UsersPoll>();
    UsersPoll* p = w.users.get();
    file_sig(w.mcf->state->users_file, p->current);   // the master loaded this one
    p->ev.handler = poll;
    p->ev.data = &w;
    p->ev.log = cycle->log;
    p->ev.cancelable = 1;
    ngx_add_timer(&p->ev, w.mcf->users_file_interval);
    return NGX_OK;
}

}  // namespace llmgw
