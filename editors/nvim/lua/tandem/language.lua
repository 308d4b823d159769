-- The user's language servers as the agent's eyes: answers the daemon's
-- `tandem/diagnostics` (vim.diagnostic.get), `tandem/definition` and
-- `tandem/references` (textDocument/* over the buffer's attached clients,
-- never tandem itself) and `tandem/workspaceSymbols` (workspace/symbol),
-- and reports every DiagnosticChanged as `tandem/diagnosticsChanged` with
-- the version the server published them for (the buffer's when unknown),
-- so the daemon can check its edits.
--
-- Positions arrive and leave in tandem's negotiated encoding; each server
-- is asked in its own. A file that is not loaded is loaded invisibly
-- (bufadd + bufload, no window) and unloaded again once answered. A
-- request nothing can answer gets an empty result with a reason.
local ask = require('tandem.ask')
local client = require('tandem.client')

local M = {}

--- What the plugin answers (`experimental.tandem.languageFeatures`).
M.FEATURES = { 'diagnostics', 'definition', 'references', 'symbols' }

--- How long a server may take to attach to a file tandem loaded, and to answer.
local ATTACH_MS = 10000
local ANSWER_MS = 10000

local function tandem_id()
  local c = client.get()
  return c and c.id
end

--- The language servers attached to `buf` that answer `method`, tandem excluded.
local function servers(buf, method)
  local own = tandem_id()
  local found = {}
  for _, c in ipairs(vim.lsp.get_clients({ bufnr = buf })) do
    if c.id ~= own and c:supports_method(method, buf) then
      table.insert(found, c)
    end
  end
  return found
end

--- Every running language server that answers `method`, tandem excluded.
local function all_servers(method)
  local own = tandem_id()
  local found = {}
  for _, c in ipairs(vim.lsp.get_clients()) do
    if c.id ~= own and c:supports_method(method) then
      table.insert(found, c)
    end
  end
  return found
end

--- Yields (inside the request's coroutine) until `cond()` or `ms` pass.
local function wait_until(cond, ms)
  if cond() then
    return true
  end
  return ask.await(function(done)
    local timer = assert(vim.uv.new_timer())
    local waited = 0
    timer:start(20, 20, function()
      waited = waited + 20
      vim.schedule(function()
        if timer:is_closing() then
          return
        end
        local ok = cond()
        if ok or waited >= ms then
          timer:stop()
          timer:close()
          done(ok)
        end
      end)
    end)
  end)
end

--- The file lines of `uri`, for converting columns: the buffer's when it
--- is loaded, else the file's.
local function line_reader()
  local files = {}
  return function(uri, line)
    local buf = vim.uri_to_bufnr(uri)
    if vim.api.nvim_buf_is_loaded(buf) then
      return vim.api.nvim_buf_get_lines(buf, line, line + 1, false)[1] or ''
    end
    if files[uri] == nil then
      local ok, lines = pcall(vim.fn.readfile, vim.uri_to_fname(uri))
      files[uri] = ok and lines or {}
    end
    return files[uri][line + 1] or ''
  end
end

--- `character` of `text` counted in `from` units, counted in `to` units.
local function recount(text, character, from, to)
  if from == to then
    return character
  end
  local ok, byte = pcall(vim.str_byteindex, text, from, character, false)
  if not ok then
    return character
  end
  local ok2, out = pcall(vim.str_utfindex, text, to, byte, false)
  return ok2 and out or character
end

local function convert_range(range, lines, uri, from, to)
  local function pos(p)
    return { line = p.line, character = recount(lines(uri, p.line), p.character, from, to) }
  end
  return { start = pos(range.start), ['end'] = pos(range['end']) }
end

--- Buffers tandem loaded, with how many requests still use each.
local borrowed = {} --- @type table<integer, integer>

--- The buffer of `uri`, loaded; `opened` when tandem loaded it (or a
--- request still running did): give it back with `unload`.
local function load(uri)
  local buf = vim.uri_to_bufnr(uri)
  if borrowed[buf] then
    borrowed[buf] = borrowed[buf] + 1
    return buf, true
  end
  if vim.api.nvim_buf_is_loaded(buf) then
    return buf, false
  end
  vim.fn.bufload(buf)
  vim.bo[buf].buflisted = false
  borrowed[buf] = 1
  return buf, true
end

--- Gives back the buffers `load` lent; the last request to use one unloads
--- it, after its answer has gone out, unless the user has it in a window
--- or changed it meanwhile.
local function unload(opened)
  for _, buf in ipairs(opened) do
    borrowed[buf] = (borrowed[buf] or 1) - 1
    if borrowed[buf] <= 0 then
      borrowed[buf] = nil
      vim.schedule(function()
        if
          not borrowed[buf]
          and vim.api.nvim_buf_is_loaded(buf)
          and vim.fn.bufwinid(buf) == -1
          and not vim.bo[buf].modified
        then
          pcall(vim.api.nvim_buf_delete, buf, { force = false })
        end
      end)
    end
  end
end

--- After loading a file: whether a language server attached to it (one
--- starting for it is given `ATTACH_MS`; a file no server is configured
--- for is given up on after a short while).
local function attached(buf)
  local function any()
    local own = tandem_id()
    for _, c in ipairs(vim.lsp.get_clients({ bufnr = buf })) do
      if c.id ~= own then
        return true
      end
    end
    return false
  end
  return wait_until(any, 2000)
end

local function short(uri)
  return vim.fn.fnamemodify(vim.uri_to_fname(uri), ':~:.')
end

--- A buffer's diagnostics as LSP diagnostics in `encoding`.
local function lsp_diagnostics(buf, encoding)
  local lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
  local function pos(lnum, col)
    local text = lines[lnum + 1] or ''
    return { line = lnum, character = recount(text, math.min(col, #text), 'utf-8', encoding) }
  end
  local out = {}
  for _, d in ipairs(vim.diagnostic.get(buf)) do
    local code = d.code
    if type(code) ~= 'string' and type(code) ~= 'number' then
      code = nil
    end
    table.insert(out, {
      range = { start = pos(d.lnum, d.col), ['end'] = pos(d.end_lnum or d.lnum, d.end_col or d.col) },
      severity = d.severity,
      message = d.message,
      source = d.source,
      code = code,
    })
  end
  return out
end

-- The document version the diagnostics being stored are for, by buffer,
-- while Neovim's own handler stores them: `vim.diagnostic.set` fires
-- DiagnosticChanged (and so `M.report`) before the handler returns.
-- Neovim 0.11 keeps no version with the diagnostics it stores (neither in
-- the diagnostic nor in the namespace's metadata), so the plugin wraps the
-- two handlers to see it: a push's `params.version`, a pull's
-- `ctx.version` (the buffer's version when the request was sent).
local storing = {}

local function recording(method, version_and_buf)
  local original = vim.lsp.handlers[method]
  if not original then
    return
  end
  vim.lsp.handlers[method] = function(err, result, ctx, config)
    local version, buf = version_and_buf(result, ctx)
    if not (version and buf and buf > 0) then
      return original(err, result, ctx, config)
    end
    storing[buf] = version
    local ok, out = pcall(original, err, result, ctx, config)
    storing[buf] = nil
    if not ok then
      error(out, 0)
    end
    return out
  end
end

local recorded = false

--- Wraps Neovim's diagnostics handlers (once) to learn the version each
--- report is for. A client with its own `handlers` for them bypasses this:
--- its reports carry the buffer's version, as before.
function M.record_versions()
  if recorded then
    return
  end
  recorded = true
  recording('textDocument/publishDiagnostics', function(params, _)
    if type(params) ~= 'table' or type(params.version) ~= 'number' or not params.uri then
      return nil
    end
    return params.version, vim.fn.bufnr(vim.uri_to_fname(params.uri))
  end)
  recording('textDocument/diagnostic', function(result, ctx)
    if type(result) ~= 'table' or type(ctx.version) ~= 'number' then
      return nil
    end
    return ctx.version, ctx.bufnr
  end)
end

--- The version a buffer's diagnostics are for: the one the server
--- published them for while they are stored, else the buffer's own.
local function version_of(buf)
  if storing[buf] then
    return storing[buf]
  end
  local versions = vim.lsp.util.buf_versions
  return versions and versions[buf] or vim.api.nvim_buf_get_changedtick(buf)
end

local function file_diagnostics(buf)
  return {
    uri = vim.uri_from_bufnr(buf),
    version = version_of(buf),
    diagnostics = lsp_diagnostics(buf, client.encoding()),
  }
end

--- `tandem/diagnostics {uris?}`.
function M.diagnostics(params)
  local files, opened = {}, {}
  if params.uris then
    for _, uri in ipairs(params.uris) do
      local buf, fresh = load(uri)
      if fresh then
        table.insert(opened, buf)
      end
      if fresh and attached(buf) and #vim.diagnostic.get(buf) == 0 then
        -- A server that attaches analyses the file; wait for its word.
        local reported = false
        local id = vim.api.nvim_create_autocmd('DiagnosticChanged', {
          buffer = buf,
          callback = function()
            reported = true
          end,
        })
        wait_until(function()
          return reported
        end, ATTACH_MS)
        pcall(vim.api.nvim_del_autocmd, id)
      end
      table.insert(files, file_diagnostics(buf))
    end
  else
    local seen = {}
    for _, d in ipairs(vim.diagnostic.get(nil)) do
      if not seen[d.bufnr] and vim.api.nvim_buf_is_loaded(d.bufnr) and vim.api.nvim_buf_get_name(d.bufnr) ~= '' then
        seen[d.bufnr] = true
        table.insert(files, file_diagnostics(d.bufnr))
      end
    end
  end
  unload(opened)
  return { files = files }
end

--- Asks `method` of the servers attached to `params.uri`'s buffer, each in
--- its own encoding; returns the locations in tandem's, or a reason.
local function locations(method, params, context)
  local buf, fresh = load(params.uri)
  local opened = fresh and { buf } or {}
  if fresh and attached(buf) and #servers(buf, method) == 0 then
    -- Attached but not initialized yet: its capabilities come with it.
    wait_until(function()
      return #servers(buf, method) > 0
    end, ATTACH_MS)
  end
  local asked = servers(buf, method)
  if #asked == 0 then
    unload(opened)
    return {
      locations = {},
      reason = 'no language server that answers ' .. method .. ' is attached to ' .. short(params.uri),
    }
  end
  local ours = client.encoding()
  local lines = line_reader()
  local pending, found, errors = #asked, {}, {}
  local finished = ask.await(function(done)
    local timer = assert(vim.uv.new_timer())
    timer:start(ANSWER_MS, 0, function()
      timer:close()
      done(false)
    end)
    for _, server in ipairs(asked) do
      local enc = server.offset_encoding or 'utf-16'
      local request = {
        textDocument = { uri = params.uri },
        position = {
          line = params.position.line,
          character = recount(lines(params.uri, params.position.line), params.position.character, ours, enc),
        },
        context = context,
      }
      server:request(method, request, function(err, result)
        if err then
          table.insert(errors, server.name .. ': ' .. (err.message or tostring(err)))
        elseif result then
          -- Location | Location[] | LocationLink[]
          local list = result.uri and { result } or result.targetUri and { result } or result
          for _, l in ipairs(list) do
            local uri = l.uri or l.targetUri
            local range = l.range or l.targetSelectionRange or l.targetRange
            if uri and range then
              table.insert(found, { uri = uri, range = convert_range(range, lines, uri, enc, ours) })
            end
          end
        end
        pending = pending - 1
        if pending == 0 and not timer:is_closing() then
          timer:stop()
          timer:close()
          done(true)
        end
      end, buf)
    end
  end)
  unload(opened)
  local reason
  if not finished then
    reason = 'a language server did not answer ' .. method .. ' within ' .. ANSWER_MS .. ' ms'
  elseif #errors > 0 then
    reason = table.concat(errors, '; ')
  end
  return { locations = found, reason = reason }
end

--- `tandem/definition {uri, position}`.
function M.definition(params)
  return locations('textDocument/definition', params, nil)
end

--- `tandem/references {uri, position, includeDeclaration}`.
function M.references(params)
  return locations('textDocument/references', params, { includeDeclaration = params.includeDeclaration ~= false })
end

--- `tandem/workspaceSymbols {query}`.
function M.workspace_symbols(params)
  local asked = all_servers('workspace/symbol')
  if #asked == 0 then
    return { symbols = {}, reason = 'no running language server answers workspace/symbol' }
  end
  local ours = client.encoding()
  local lines = line_reader()
  local pending, found = #asked, {}
  ask.await(function(done)
    local timer = assert(vim.uv.new_timer())
    timer:start(ANSWER_MS, 0, function()
      timer:close()
      done(false)
    end)
    for _, server in ipairs(asked) do
      local enc = server.offset_encoding or 'utf-16'
      server:request('workspace/symbol', { query = params.query or '' }, function(err, result)
        for _, s in ipairs((not err and result) or {}) do
          local location = s.location or {}
          local range = location.range or { start = { line = 0, character = 0 }, ['end'] = { line = 0, character = 0 } }
          if location.uri then
            table.insert(found, {
              name = s.name,
              kind = s.kind,
              containerName = s.containerName,
              location = { uri = location.uri, range = convert_range(range, lines, location.uri, enc, ours) },
            })
          end
        end
        pending = pending - 1
        if pending == 0 and not timer:is_closing() then
          timer:stop()
          timer:close()
          done(true)
        end
      end)
    end
  end)
  return { symbols = found }
end

--- Reports a buffer's diagnostics to the daemon when they change.
function M.report(buf)
  local c = client.get()
  if not c or not client.ready() or not vim.lsp.buf_is_attached(buf, c.id) then
    return
  end
  c:notify('tandem/diagnosticsChanged', file_diagnostics(buf))
end

--- Reports every attached buffer's diagnostics (when the daemon starts).
function M.report_all()
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    M.report(buf)
  end
end

--- The request handlers, by method.
M.handlers = {
  ['tandem/diagnostics'] = function(_, params)
    return M.diagnostics(params or {})
  end,
  ['tandem/definition'] = function(_, params)
    return M.definition(params)
  end,
  ['tandem/references'] = function(_, params)
    return M.references(params)
  end,
  ['tandem/workspaceSymbols'] = function(_, params)
    return M.workspace_symbols(params or {})
  end,
}

return M
