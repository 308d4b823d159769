-- The session's model and reasoning effort (`:TandemModel`), and the
-- context and cost the daemon reports after every model call: what
-- `require('tandem').status()` and the chat window's winbar show.
local client = require('tandem.client')

local M = {}

--- What the daemon said last: the model in force, the models to switch
--- to, the context in use and the session's cost.
M.state = {
  model = nil, --- @type string?
  effort = nil, --- @type string?
  models = {}, --- @type {id: string, name: string, efforts: string[], contextWindow: integer}[]
  used = nil, --- @type integer?
  size = nil, --- @type integer?
  cost = nil, --- @type number?
}

--- Takes the `model`, `effort` and `models` of a newSession, loadSession
--- or setModel answer.
function M.remember(result)
  if not result or not result.model then
    return
  end
  M.state.model, M.state.effort = result.model, result.effort
  M.state.models = result.models or M.state.models
  for _, m in ipairs(M.state.models) do
    if m.id == result.model then
      M.state.size = m.contextWindow
    end
  end
end

--- Forgets the context figures (another session, a new daemon).
function M.reset()
  M.state.used, M.state.cost = nil, nil
end

--- The `current_model_update` renderer.
function M.on_model_update(update)
  M.state.model, M.state.effort = update.modelId, update.effort
end

--- The context and cost of a `usage` update.
function M.on_usage(update)
  if update.context then
    M.state.used, M.state.size = update.context.used, update.context.size
  end
  local session = update.session or {}
  if session.costUsd then
    M.state.cost = session.costUsd
  end
end

local function tokens(n)
  if n >= 1000 then
    return string.format('%.1fk', n / 1000)
  end
  return tostring(n)
end

--- `fast·high 15/32.0k (0%) $0.0000` — the model (and effort), the context
--- in use of its window, the session's cost when known; '' before any.
function M.status()
  local s = M.state
  if not s.model then
    return ''
  end
  local parts = { s.effort and (s.model .. '·' .. s.effort) or s.model }
  if s.used and s.size and s.size > 0 then
    table.insert(
      parts,
      string.format('%s/%s (%d%%)', tokens(s.used), tokens(s.size), math.floor(s.used * 100 / s.size + 0.5))
    )
  end
  if s.cost then
    table.insert(parts, string.format('$%.4f', s.cost))
  end
  return table.concat(parts, ' ')
end

--- The chat window's winbar.
function M.winbar()
  local status = M.status()
  return status == '' and 'tandem' or ('tandem: ' .. status)
end

local function report(err)
  vim.notify('tandem: ' .. (err.message or vim.inspect(err)), vim.log.levels.ERROR)
end

--- Switches the chat session's model (and effort): `tandem/setModel`.
function M.set(model, effort)
  local session = require('tandem.session')
  session.ensure(function(id)
    client.request('tandem/setModel', { sessionId = id, model = model, effort = effort }, function(err, result)
      if err then
        return report(err)
      end
      M.remember(result)
      vim.api.nvim_exec_autocmds('User', { pattern = 'TandemModelSet', modeline = false, data = result })
    end)
  end)
end

local function pick_effort(model)
  if #(model.efforts or {}) == 0 then
    return M.set(model.id)
  end
  vim.ui.select(model.efforts, {
    prompt = 'tandem reasoning effort (' .. model.id .. ')',
    kind = 'tandem.effort',
  }, function(effort)
    if effort then
      M.set(model.id, effort)
    end
  end)
end

--- `:TandemModel [model [effort]]`: with no argument, picks the model
--- (then its effort) with vim.ui.select.
function M.command(args)
  local words = vim.split(vim.trim(args or ''), '%s+', { trimempty = true })
  if #words > 0 then
    return M.set(words[1], words[2])
  end
  require('tandem.session').ensure(function()
    vim.ui.select(M.state.models, {
      prompt = 'tandem model',
      kind = 'tandem.model',
      format_item = function(m)
        local current = m.id == M.state.model and ' (current)' or ''
        return string.format('%s  %s, %s tokens%s', m.id, m.name, tokens(m.contextWindow or 0), current)
      end,
    }, function(model)
      if model then
        pick_effort(model)
      end
    end)
  end)
end

--- Completion of `:TandemModel`: model ids, then the model's efforts.
function M.complete(_, line)
  local words = vim.split(line, '%s+', { trimempty = false })
  if #words <= 2 then
    return vim.tbl_map(function(m)
      return m.id
    end, M.state.models)
  end
  for _, m in ipairs(M.state.models) do
    if m.id == words[2] then
      return m.efforts or {}
    end
  end
  return {}
end

return M
