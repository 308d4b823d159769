-- What a session's turns left behind, from its `tandem/update`s (live or
-- replayed): the user's messages, which `:TandemFork` offers as fork
-- points, and the places the last turn's tool calls touched, which
-- `:TandemLocations` puts in the quickfix list.
local M = {}

--- Per session: `{id, text}` of each user message, in order.
--- @type table<string, {id: string, text: string}[]>
M.messages = {}

--- Per session: the last turn with tool locations, and its quickfix items.
--- @type table<string, {turn: string?, items: table[]}>
M.locations = {}

--- Tool titles by session and call id, for the quickfix text.
local titles = {}

local function first_line(content)
  for _, block in ipairs(content or {}) do
    if block.type == 'text' and block.text then
      return vim.split(block.text, '\n', { plain = true })[1]
    end
  end
  return ''
end

--- Notes what an update says (called for every `tandem/update`).
function M.note(params)
  local sid = params and params.sessionId
  local update = params and params.update or {}
  if not sid then
    return
  end
  if update.sessionUpdate == 'user_message' and update.messageId then
    M.messages[sid] = M.messages[sid] or {}
    local seen = vim.tbl_filter(function(m)
      return m.id == update.messageId
    end, M.messages[sid])
    if #seen == 0 then
      table.insert(M.messages[sid], { id = update.messageId, text = first_line(update.content) })
    end
  elseif update.sessionUpdate == 'tool_call' then
    titles[sid .. '/' .. (update.toolCallId or '')] = update.title
  elseif update.sessionUpdate == 'tool_call_update' and update.locations then
    local last = M.locations[sid]
    if not last or last.turn ~= params.turnId then
      last = { turn = params.turnId, items = {} }
      M.locations[sid] = last
    end
    local title = titles[sid .. '/' .. update.toolCallId] or update.toolCallId
    for _, loc in ipairs(update.locations) do
      table.insert(last.items, { filename = loc.path, lnum = loc.line or 1, col = 1, text = title })
    end
  end
end

--- Forgets a session's trail (its chat is cleared for a replay).
function M.forget(sid)
  M.messages[sid], M.locations[sid] = nil, nil
end

--- Fills the quickfix list with the last turn's locations of `sid`;
--- returns how many.
function M.to_quickfix(sid)
  local last = sid and M.locations[sid]
  local items = last and last.items or {}
  vim.fn.setqflist({}, ' ', {
    title = 'tandem: locations of turn ' .. (last and last.turn or '?'),
    items = items,
  })
  return #items
end

return M
